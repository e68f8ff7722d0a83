"""Red team 25: solbench's bytecode cache (solbench/bytecode.py: the parent's
$SOLBENCH_CACHE/pyc, bound read-only at /solbench-pyc in every sandbox) and the reference's
unchecked timed calls (protocol.TimeIter.check). Each hostile candidate is a real file under
tests/harness/ run through the real harness on the CPU.

The cache is used only where torch has no bytecode beside its source; here it is forced
(``bytecode._active``, as tests/test_bytecode.py does) on a cache the test fills the way a
parent does: a child interpreter that enables it and imports a package."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import solbench
from solbench import bytecode
from solbench.harness import EvalConfig, evaluate, sandbox
from solbench.spec import Status, load_solution

from harness_helpers import matmul_problem

HERE = Path(__file__).resolve().parent
SRC = Path(solbench.__file__).resolve().parents[1]

sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")


def _cand(p, name):
    return load_solution(HERE / name, p)


def _parent_imports(root: Path, cache: Path, pkg: str, site: Path) -> None:
    """What a parent does: enable the cache (for ``pkg``, which has no bytecode) and import it."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SOLBENCH_"))}
    e.update(PYTHONPATH=f"{SRC}{os.pathsep}{site}", SOLBENCH_CACHE=str(cache))
    code = f"from solbench import bytecode; assert bytecode.enable({pkg!r}); import {pkg}"
    subprocess.run([sys.executable, "-c", code], env=e, check=True, timeout=120)


@pytest.fixture
def pyc_cache(monkeypatch, solbench_cache):
    """A bytecode cache in use, filled by a parent: ``site/nopyc_pkg`` (a package the worker
    is shown: $SOLBENCH_SANDBOX_BIND) and ``hidden/secret_pkg`` (a folder outside the
    sandbox's view: the user's own code, the repository's tests), both imported by the
    parent. Yields (root, the cache's pyc folder)."""
    root = Path(tempfile.mkdtemp(prefix="solbench-red25-", dir="/var/tmp"))
    os.chmod(root, 0o755)
    cache = root / "cache"
    cache.mkdir()
    for folder, pkg, text in (("site", "nopyc_pkg", "VALUE = 6 * 7\n"),
                              ("hidden", "secret_pkg", "TOKEN = 'RED25-SECRET-TOKEN-0451'\n")):
        (root / folder / pkg).mkdir(parents=True)
        (root / folder / pkg / "__init__.py").write_text(text)
        _parent_imports(root, cache, pkg, root / folder)
    pyc = cache / "pyc"
    assert list(pyc.rglob("secret_pkg/*.pyc")) and list(pyc.rglob("nopyc_pkg/*.pyc"))
    monkeypatch.setenv("SOLBENCH_SANDBOX_BIND", str(root / "site"))
    monkeypatch.setattr(bytecode, "_active", str(pyc))
    yield root, pyc
    shutil.rmtree(root, ignore_errors=True)


def _tree(d: Path) -> dict:
    out = {}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        out[str(p)] = (st.st_mode, st.st_mtime_ns, st.st_nlink,
                       hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else None)
    return out


# ------------------------------------------------------------------ 1. the cache is read-only
@sandboxed
@pytest.mark.parametrize("mode", ["uid", "userns"])
def test_a_candidate_cannot_plant_bytecode_in_the_cache(tmp_path, pyc_cache, mode, monkeypatch):
    """Both sandbox modes (``uid``: another uid, a root-made read-only bind; ``userns``: the
    harness's own uid mapped to 0 in a user namespace of bwrap's, capabilities dropped, no
    nested user namespace). cand_red25_pyc_write.py: overwrite, truncate, unlink, rename, chmod, utime, links and a
    new file through /solbench-pyc; the host path behind the bind (mountinfo), directly and
    through /proc/1/root; inherited directory descriptors; a remount read-write in a new user
    and mount namespace; open_by_handle_at. Every one refused; the host's cache unchanged."""
    if os.geteuid() != 0 and mode == "uid":
        pytest.skip("the uid mode needs root")
    monkeypatch.setenv("SOLBENCH_SANDBOX", mode)
    if sandbox.resolve_mode("cpu")[0] != mode:
        pytest.skip(f"no {mode} sandbox here")
    root, pyc = pyc_cache
    before = _tree(pyc)
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, _cand(p, "cand_red25_pyc_write.py"), EvalConfig(device="cpu", iters=4, rounds=1))
    log = t.evaluation.log or ""
    assert "PYC victims " in log and "PYC overwrite refused" in log, log[-2000:]  # the attack ran
    assert "PYC-WROTE" not in log, log[-3000:]
    assert _tree(pyc) == before


# ------------------------------------------------------------------ 2. what the cache shows
@sandboxed
def test_the_cache_shows_no_bytecode_of_folders_the_sandbox_hides(tmp_path, pyc_cache):
    """cand_red25_pyc_snoop.py walks /solbench-pyc for the compiled constants of host modules.
    Old code: the parent's whole cache was bound, so the bytecode of every module any solbench
    CLI process had imported (from the user's home, /root, the repository's tests, a model's
    code: folders the sandbox hides) was readable, names and constants: it printed
    ``RED25-SECRET-TOKEN-0451`` from hidden/secret_pkg. The bytecode of what the worker is
    shown (site/nopyc_pkg here) stays readable, and is still used."""
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, _cand(p, "cand_red25_pyc_snoop.py"), EvalConfig(device="cpu", iters=4, rounds=1))
    log = t.evaluation.log or ""
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings, log[-2000:])
    assert "SNOOP-NO-CACHE" not in log
    assert "RED25-SECRET" not in log, log[-2000:]
    assert "SNOOP-ENV" not in log, log[-2000:]  # nor does its environment say where the cache is
    assert "SNOOP-PYC visible=False" not in log, log[-2000:]
    assert "SNOOP-PYC visible=True" in log and "site/nopyc_pkg/__init__.py" in log, log[-2000:]


# ------------------------------------------------------------------ 3. TimeIter.check
def test_an_override_registered_in_a_timed_call_is_still_seen(tmp_path, solbench_cache):
    """cand_red25_timed_override.py registers aten::zero_ / fill_.Scalar kernels of its own in
    its first timed call (clean through correctness and warm-up). The reference's timed
    calls skip the worker's interposition check now (TimeIter.check False); the candidate's
    must not: ``interposition`` (REWARD_HACK), found in a timed call."""
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, _cand(p, "cand_red25_timed_override.py"), EvalConfig(device="cpu", iters=6, rounds=1))
    ev = t.evaluation
    assert "OVERRIDE REGISTERED IN TIMED CALL" in (ev.log or ""), (ev.status, (ev.log or "")[-1500:])
    assert ev.status == Status.REWARD_HACK, (ev.status, ev.findings, (ev.log or "")[-1500:])
    assert "interposition" in [f.check for f in ev.findings], ev.findings


def test_every_cpu_timed_call_is_checked_on_both_sides(tmp_path, solbench_cache, monkeypatch):
    """The candidate's timed calls always carry ``check`` (whichever path), and on the CPU the
    reference's do too: there a sample is the parent's window less the no-op baseline, which
    the reference's worker measures with the interposition check inside (Worker._on_noop).
    Old code: the reference's CPU calls skipped the check (~0.9 ms on this 2-core host,
    DispatchGuard.changes), so its samples read that much short: an honest twin of the
    reference (cand ``a @ b``, 64 x 64) timed ~10 ms a call while half the reference's samples
    were floored at 0.001 ms."""
    from solbench.harness import protocol

    from harness_helpers import py_solution

    sent: dict[int, list[bool]] = {}
    real = protocol.request

    def spy(h, req, *a, **k):
        if isinstance(req, protocol.TimeIter):
            sent.setdefault(id(h), []).append(req.check)
        return real(h, req, *a, **k)

    monkeypatch.setattr(protocol, "request", spy)
    p = matmul_problem(tmp_path, (64,))
    s = py_solution("twin", "import torch\n\ndef run(a, b):\n    return a @ b\n", "mm")
    (t,) = evaluate(p, s, EvalConfig(device="cpu", iters=6, rounds=1))
    assert t.evaluation.reference_timing is not None, t.evaluation.findings
    assert len(sent) == 2, sent  # the candidate's worker and the reference's
    assert all(all(v) for v in sent.values()), sent


@sandboxed
@pytest.mark.parametrize("same", [True, False])
def test_the_build_cache_mount_shows_no_bytecode_cache(tmp_path, pyc_cache, monkeypatch, same):
    """A user who points $SOLBENCH_BUILD_CACHE at $SOLBENCH_CACHE itself or at a folder holding
    it (one cache folder for everything): the build cache is bound read-only at
    sandbox.BUILD_CACHE_MOUNT. Old code: the bytecode cache inside it was shown there whole,
    and cand_red25_pyc_snoop.py printed the hidden module's token from
    ``/tmp/solbench-builds/pyc/...``. Now the hidden folders and the bytecode cache inside
    the build cache get an empty read-only tmpfs there too."""
    root, pyc = pyc_cache
    monkeypatch.setenv("SOLBENCH_BUILD_CACHE", str(root / "cache") if same else str(root))
    monkeypatch.setenv("SOLBENCH_CACHE", str(root / "cache"))
    p = matmul_problem(tmp_path, (64,))
    (t,) = evaluate(p, _cand(p, "cand_red25_pyc_snoop.py"), EvalConfig(device="cpu", iters=4, rounds=1))
    log = t.evaluation.log or ""
    assert t.evaluation.status == Status.PASSED, (t.evaluation.status, t.evaluation.findings, log[-2000:])
    assert "RED25-SECRET" not in log, log[-2000:]
    assert "SNOOP-PYC visible=True" in log, log[-2000:]  # the shown part still at /solbench-pyc
