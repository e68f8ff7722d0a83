"""Hostile (CPU, issue 30 item 3): honest a @ b, but it prints its whole environment to
stdout at import and in every call; the worker's stdout is stored in the trace's log, so any
token the user exported and the worker inherited ends up in the results file."""
import os

print("ENVDUMP " + repr(dict(os.environ)), flush=True)


def run(a, b):
    print("ENVDUMP " + repr(dict(os.environ)), flush=True)
    return a @ b
