"""Hostile (CPU, issue 30 item 6): fills the sandbox's tmpfs ($SOLBENCH_TEST_FILL_DIR,
default /tmp; /dev/shm too) with 64 MiB files: host RAM, not disk. Bounded by a ceiling
($SOLBENCH_TEST_MEM_CEILING, default 2 GiB) so a test host survives the unfixed harness;
reaching it alive means nothing capped it (``NO CAP``). A full tmpfs (ENOSPC) is reported
with the bytes written (``ENOSPC after N``)."""
import os

CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))
BLOCK = b"\1" * (64 << 20)


def run(a, b):
    d = os.environ.get("SOLBENCH_TEST_FILL_DIR", "/tmp")
    got = 0
    try:
        while got < CEILING:
            with open(os.path.join(d, f"fill-{os.getpid()}-{got}"), "wb") as f:
                f.write(BLOCK)
            got += len(BLOCK)
            print(f"WROTE {got}", flush=True)
    except OSError as e:
        raise RuntimeError(f"ENOSPC after {got} bytes: {e}") from None
    raise RuntimeError(f"NO CAP: wrote {got} bytes to {d}")
