"""Hostile (issue 11): an infinite loop in the first call (held `solbench eval` for the
600 s first-call limit before per-call timeouts were an option)."""


def run(a, b):
    while True:
        pass
