"""Hostile (red team of issue 30, session 20): memory through a file mapping. A sparse file
of ``CEILING`` bytes on the sandbox's /tmp ($SOLBENCH_TEST_FILL_DIR to choose /dev/shm) is
mapped shared and every page touched: tmpfs pages, host RAM, which neither RLIMIT_DATA nor
a count of anonymous memory sees. Past the tmpfs's size the kernel answers a touch with
SIGBUS; under a memory cgroup the pages are charged and the OOM killer may come first.
Prints ``MAPPED N`` per 64 MiB touched; ``NO CAP`` when the whole ceiling was touched."""
import mmap
import os

CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))


def run(a, b):
    d = os.environ.get("SOLBENCH_TEST_FILL_DIR", "/tmp")
    path = os.path.join(d, f"map-{os.getpid()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, CEILING)
    m = mmap.mmap(fd, CEILING, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    for off in range(0, CEILING, 4096):
        m[off] = 1
        if off % (64 << 20) == 0:
            print(f"MAPPED {off}", flush=True)
    raise RuntimeError(f"NO CAP: touched {CEILING} bytes of a shared mapping in {d}")
