"""Hostile (exit): sys.exit(0) from inside the call (a "clean" exit before any result)."""
import sys


def run(x, y):
    sys.exit(0)
