"""Hostile (red team 25): host snooping through the bytecode cache. The parent's bytecode
cache ($SOLBENCH_CACHE/pyc, solbench/bytecode.py) mirrors the absolute path of every module
the parent (any solbench CLI process, a test run importing solbench.cli) ever compiled, and
the whole tree was bound read-only at /solbench-pyc in every sandbox. So a worker sees the
names and the compiled code (constants, strings) of host modules it must not see: under the
user's home or /root, the repository's tests, a user's model code. At import this candidate
walks /solbench-pyc and prints ``SNOOP <path> <string>`` for every host folder outside its
own view that has bytecode there, and the string constants that start with ``RED25``."""
import os
import re

ROOT = "/solbench-pyc"


def _snoop():
    if not os.path.isdir(ROOT):
        print("SNOOP-NO-CACHE", flush=True)
        return
    for dirpath, dirnames, filenames in os.walk(ROOT):
        host = dirpath[len(ROOT):] or "/"
        for f in filenames:
            if not f.endswith(".pyc"):
                continue
            try:
                with open(os.path.join(dirpath, f), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            src = os.path.join(host, f.split(".")[0] + ".py")  # the prefix's layout
            seen = os.path.exists(src)  # is the source itself in this sandbox?
            print(f"SNOOP-PYC visible={seen} {src}", flush=True)
            for m in re.findall(rb"RED25[A-Za-z0-9_-]{0,60}", data):
                print(f"SNOOP {src} visible={seen} {m.decode()}", flush=True)


_snoop()
# the shared build cache's mount: where $SOLBENCH_BUILD_CACHE is (or holds) $SOLBENCH_CACHE,
# the bytecode cache is there too
for dirpath, _, filenames in os.walk("/tmp/solbench-builds"):
    for f in filenames:
        if not f.endswith(".pyc"):
            continue
        try:
            with open(os.path.join(dirpath, f), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        for m in re.findall(rb"RED25[A-Za-z0-9_-]{0,60}", data):
            print(f"SNOOP-BUILDS {dirpath}/{f} {m.decode()}", flush=True)
for k, v in os.environ.items():  # where the host keeps the cache: its path is not the worker's
    if "/pyc" in v and v != ROOT:
        print(f"SNOOP-ENV {k}={v}", flush=True)


def run(a, b):
    return a @ b
