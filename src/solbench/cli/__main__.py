"""`python -m solbench.cli ...` runs the CLI (same as the `solbench` script)."""
from . import main

main()
