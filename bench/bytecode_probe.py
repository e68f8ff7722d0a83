"""Does this host's torch have bytecode, and what does compiling it cost each process? (issue 29)

    python bench/bytecode_probe.py [--reps 3]

Prints the interpreter's bytecode settings, whether torch has a ``.pyc`` beside its source
(solbench.bytecode.has_bytecode) and whether its folder is writable, how many of torch's
``.py`` files have one; then the wall time of ``import torch`` in fresh interpreters: as the
host is (``plain``), and with a bytecode prefix of its own (``prefix``: the first run compiles
and writes it, the next ones read it). Also the size of solbench's own bytecode cache when
one exists. Nothing is changed outside a temporary folder."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from solbench import bytecode, paths  # noqa: E402


def _import_torch_s(env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True, timeout=300)
    return time.perf_counter() - t


def _tree_bytes(d: Path) -> tuple[int, int]:
    n = size = 0
    for root, _dirs, files in os.walk(d):
        for f in files:
            n += 1
            size += os.path.getsize(os.path.join(root, f))
    return n, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    import importlib.util

    spec = importlib.util.find_spec("torch")
    tdir = Path(spec.origin).parent
    print(f"python {sys.version.split()[0]}  dont_write_bytecode={sys.flags.dont_write_bytecode}  "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE')!r}  "
          f"PYTHONPYCACHEPREFIX={os.environ.get('PYTHONPYCACHEPREFIX')!r}  uid={os.getuid()}")
    print(f"torch at {tdir}: bytecode beside its __init__: {bytecode.has_bytecode('torch')}; "
          f"folder writable: {os.access(tdir, os.W_OK)}")
    py = list(tdir.rglob("*.py"))
    with_pyc = sum(1 for f in py if Path(importlib.util.cache_from_source(str(f))).exists())
    print(f"torch .py files: {len(py)}, with a .pyc beside: {with_pyc}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    for i in range(2):
        print(f"import torch, plain, run {i + 1}: {_import_torch_s(env):.2f} s", flush=True)
    pre = tempfile.mkdtemp(prefix="pyc-probe-")
    try:
        envp = dict(env, PYTHONPYCACHEPREFIX=pre)
        envp.pop("PYTHONDONTWRITEBYTECODE", None)
        for i in range(a.reps):
            what = "compiles and writes" if i == 0 else "reads"
            print(f"import torch, own prefix, run {i + 1} ({what}): {_import_torch_s(envp):.2f} s", flush=True)
        n, size = _tree_bytes(Path(pre))
        print(f"the prefix after import torch: {n} files, {size / 1e6:.1f} MB")
    finally:
        shutil.rmtree(pre, ignore_errors=True)
    ours = paths.cache_dir() / "pyc"
    if ours.is_dir():
        n, size = _tree_bytes(ours)
        print(f"solbench's bytecode cache {ours}: {n} files, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
