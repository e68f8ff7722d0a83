"""`python -m solbench ...` runs the CLI (same as the `solbench` script)."""
from .cli import main

main()
