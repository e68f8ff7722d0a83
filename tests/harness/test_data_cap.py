"""The memory cap without a cgroup is RLIMIT_DATA, which counts address space where a cgroup
counts pages. torch's CUDA build maps several hundred MiB of writable library data it never
touches, so on an H100 host without a memory cgroup a CPU worker was over a 512 MiB cap after
``import torch`` alone and an honest matmul failed its first allocation
(bench/results/device_s24_h100/reds21.log, ``test_inputs_beyond_the_cap_and_shared_memory_of_its_own_pass``).
The worker now sets RLIMIT_DATA after its imports, to the cap plus what it has mapped and not
touched (``sandbox.data_reserved``). Here an untouched private mapping larger than the cap
stands in for the CUDA build's data."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20

PROBE = r'''
import mmap, os, resource, sys
from solbench.harness import sandbox
cap = int(os.environ["SOLBENCH_SANDBOX_MEM"])
# 600 MiB of private writable memory never touched: VmData, not RssAnon
held = mmap.mmap(-1, 600 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
if sys.argv[1] == "old":  # the cap set as RLIMIT_DATA = cap, as before
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
else:
    print("reserved", sandbox.data_reserved() >> 20)
    sandbox.cap_data("cpu")
print("limit", resource.getrlimit(resource.RLIMIT_DATA)[0] >> 20)
def alloc(mib):
    try:
        b = bytearray(mib << 20)  # a private anonymous mapping, touched (zeroed)
        b[::4096] = b"\1" * len(b[::4096])
        return "ok"
    except MemoryError:
        return "refused"
print("alloc half", alloc(cap // 2 >> 20))
print("alloc twice", alloc(2 * cap >> 20))
'''


def run(arm: str, cap: int) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path[1:]]),
           "SOLBENCH_SANDBOX_MODE": "uid", "SOLBENCH_SANDBOX_MEM_RLIMIT": "1",
           "SOLBENCH_SANDBOX_MEM": str(cap)}
    r = subprocess.run([sys.executable, "-c", PROBE, arm], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return dict(line.split(" ", 1) if line.count(" ") == 1 else line.rsplit(" ", 1)
                for line in r.stdout.splitlines())


def test_untouched_library_data_does_not_count_against_the_cap():
    cap = 256 * MIB
    old, new = run("old", cap), run("new", cap)
    # before: 600 MiB of untouched data already over the 256 MiB cap, so even half the cap fails
    assert old["alloc half"] == "refused", old
    # now: the limit is the cap plus the untouched part (at least the 600 MiB mapping)
    assert int(new["reserved"]) >= 600, new
    assert int(new["limit"]) >= 256 + 600, new
    assert new["alloc half"] == "ok", new
    # and the cap still binds what is touched
    assert new["alloc twice"] == "refused", new


def test_no_data_limit_without_the_rlimit_mechanism():
    """With a memory cgroup (SOLBENCH_SANDBOX_MEM_RLIMIT unset) the worker sets no RLIMIT_DATA."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path[1:]]),
           "SOLBENCH_SANDBOX_MODE": "uid", "SOLBENCH_SANDBOX_MEM": str(256 * MIB)}
    env.pop("SOLBENCH_SANDBOX_MEM_RLIMIT", None)
    code = ("import resource; from solbench.harness import sandbox; sandbox.cap_data('cpu'); "
            "print(resource.getrlimit(resource.RLIMIT_DATA)[0] == resource.RLIM_INFINITY)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.strip() == "True", (r.stdout, r.stderr[-1000:])
