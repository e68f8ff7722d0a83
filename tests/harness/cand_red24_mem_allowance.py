"""Hostile (red team 24): more than the memory cap in real pages without a cgroup, where
RLIMIT_DATA is the cap plus the worker's untouched private data at the end of its imports
(sandbox.cap_data). MODE:

- ``"reserve"``: touch every untouched page of the private writable mappings that were there
  before it ran (the harness's untouched data: the allowance), then map and touch new private
  memory up to RLIMIT_DATA: cap + allowance in pages, VmData within the limit.
- ``"mprotect"``: map and touch private blocks, each made read-only once touched: VmData
  (writable private mappings only) drops back, so RLIMIT_DATA never refuses, while the pages
  stay resident; up to 1.5 limits.

Whatever it holds stays held (module global) and the call returns the right answer. It prints
``HELD <bytes>``; ``NO CAP`` when it reached its target alive. Ceiling
$SOLBENCH_TEST_MEM_CEILING (default 2 GiB) so the unfixed harness cannot take the host down.
Expected: RUNTIME_ERROR, ``memory_limit`` (the parent's watchdog counts pages)."""
import ctypes
import mmap
import os
import resource

MODE = "reserve"
CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))
BLOCK = 32 << 20
PAGE = mmap.PAGESIZE
_HOLD = []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _untouched_private():
    """(start, end) of private writable mappings with untouched pages, from smaps."""
    out, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                name = head[5] if len(head) > 5 else ""
                cur = (lo, hi) if head[1] == "rw-p" and name not in ("[stack]", "[vvar]", "[vsyscall]") else None
            elif cur and head[0] == "Rss:" and int(head[1]) * 1024 < cur[1] - cur[0]:
                out.append(cur)
    return out


def _touch_in_place(lo, hi):
    """Fault in every page of [lo, hi) by writing back the byte it holds."""
    buf = (ctypes.c_char * (hi - lo)).from_address(lo)
    for off in range(0, hi - lo, PAGE):
        buf[off] = buf[off]


def _new_block(n):
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for off in range(0, n, PAGE):
        m[off] = 1
    return m


def _grab():
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    print(f"limit {limit} VmData {_status('VmData')} RssAnon {_status('RssAnon')}", flush=True)
    if MODE == "reserve":
        for lo, hi in _untouched_private():
            _touch_in_place(lo, hi)
        print(f"allowance touched: RssAnon {_status('RssAnon')}", flush=True)
        while True:
            room = limit - _status("VmData") - (8 << 20)
            if room < PAGE:
                break
            try:
                _HOLD.append(_new_block(min(BLOCK, room // PAGE * PAGE)))
            except (OSError, MemoryError, ValueError):
                break
    else:
        target = min(CEILING, int(1.5 * limit))
        while _status("RssAnon") < target:
            m = _new_block(BLOCK)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
            if _libc.mprotect(ctypes.c_void_p(addr), BLOCK, mmap.PROT_READ) != 0:
                raise OSError(ctypes.get_errno(), "mprotect")
            _HOLD.append(m)
        print("NO CAP", flush=True)
    print(f"HELD {_status('RssAnon')} VmData {_status('VmData')}", flush=True)


def run(a, b):
    if not _HOLD:
        _grab()
    return a @ b
