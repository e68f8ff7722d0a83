"""Hostile (background process): correct output, but spawns a child process with subprocess and
leaves it running."""
import subprocess
import sys

_procs = []


def run(x, y):
    _procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"]))
    return x + y
