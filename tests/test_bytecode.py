"""solbench's own bytecode cache (solbench/bytecode.py): used only for a package installed
without bytecode, written by the parent, read (never written) by a sandboxed worker.

Each case runs in a child interpreter (the cache changes ``sys.pycache_prefix`` for the whole
process) on a throwaway package ``nopyc_pkg`` with no ``__pycache__``. Whether a process
compiled the package's source is counted by wrapping ``builtins.compile``, which the import
system calls for a module without valid bytecode (``SourceLoader.source_to_code``) and never
for one it loads from a ``.pyc``."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import solbench
from solbench import bytecode
from solbench.harness import sandbox

SRC = Path(solbench.__file__).resolve().parents[1]


def _pythonpath(*first) -> str:
    """``first``, the source tree, then whatever PYTHONPATH this run has (where a host keeps
    the harness's own dependencies, pydantic among them, outside site-packages)."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(SRC), *map(str, first), *rest])

#: the start of each child's code: every compilation of nopyc_pkg's source is recorded
COUNTING = r"""
import builtins, json, os, sys
compiled = []
_compile = builtins.compile
def counting(source, filename, *a, **k):
    if "nopyc_pkg" in str(filename):
        compiled.append(str(filename))
    return _compile(source, filename, *a, **k)
builtins.compile = counting
"""

#: run in the child: enable the cache for nopyc_pkg, import it, report what happened
PROBE = COUNTING + r"""
from solbench import bytecode
d = bytecode.enable("nopyc_pkg") if os.environ.get("PROBE_ENABLE") == "1" else None
import nopyc_pkg
print(json.dumps({"dir": d, "compiled": compiled, "prefix": sys.pycache_prefix,
                  "env": os.environ.get("PYTHONPYCACHEPREFIX"), "value": nopyc_pkg.VALUE}))
"""


@pytest.fixture
def pkg_root():
    """A folder outside /tmp holding ``nopyc_pkg`` (no bytecode), and a cache folder."""
    root = Path(tempfile.mkdtemp(prefix="solbench-pyc-test-", dir="/var/tmp"))
    os.chmod(root, 0o755)
    p = root / "site" / "nopyc_pkg"
    p.mkdir(parents=True)
    (p / "__init__.py").write_text("VALUE = 6 * 7\n")
    (root / "cache").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _child(root: Path, enable: bool, **env) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SOLBENCH_"))}
    e.update(PYTHONPATH=_pythonpath(root / "site"), SOLBENCH_CACHE=str(root / "cache"),
             PROBE_ENABLE="1" if enable else "0", **env)
    p = subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_has_bytecode_looks_beside_the_source(pkg_root, monkeypatch):
    monkeypatch.syspath_prepend(str(pkg_root / "site"))
    assert bytecode.has_bytecode("nopyc_pkg") is False
    import py_compile

    src = pkg_root / "site" / "nopyc_pkg" / "__init__.py"
    monkeypatch.setattr(sys, "pycache_prefix", None)
    py_compile.compile(str(src), doraise=True)  # what pip's install-time compilation writes
    assert bytecode.has_bytecode("nopyc_pkg") is True
    assert bytecode.has_bytecode("no_such_module_xyz") is None


def test_parent_compiles_once_then_every_process_reads_the_cache(pkg_root):
    first = _child(pkg_root, enable=True)
    assert first["dir"] == str(pkg_root / "cache" / "pyc")
    assert first["prefix"] == first["dir"] and first["env"] == first["dir"]
    assert len(first["compiled"]) == 1 and first["value"] == 42
    # the bytecode lies under the cache, mirroring the source's absolute path, not beside it
    src = pkg_root / "site" / "nopyc_pkg" / "__init__.py"
    tag = sys.implementation.cache_tag
    assert (Path(first["dir"]) / str(src.parent).lstrip("/") / f"__init__.{tag}.pyc").is_file()
    assert not (src.parent / "__pycache__").exists()
    second = _child(pkg_root, enable=True)
    assert second["compiled"] == [] and second["value"] == 42
    # a later edit of the source is compiled again, never run stale
    src.write_text("VALUE = 7 * 7  # changed\n")
    os.utime(src, (1e9, 1e9))
    third = _child(pkg_root, enable=True)
    assert len(third["compiled"]) == 1 and third["value"] == 49


def test_dont_write_bytecode_of_the_user_keeps_sources_clean_and_cache_still_written(pkg_root):
    first = _child(pkg_root, enable=True, PYTHONDONTWRITEBYTECODE="1")
    assert len(first["compiled"]) == 1
    assert not (pkg_root / "site" / "nopyc_pkg" / "__pycache__").exists()
    assert _child(pkg_root, enable=True, PYTHONDONTWRITEBYTECODE="1")["compiled"] == []


def test_not_used_when_turned_off_or_the_user_set_a_prefix(pkg_root):
    off = _child(pkg_root, enable=True, SOLBENCH_BYTECODE_CACHE="0")
    assert off["dir"] is None and off["prefix"] is None and len(off["compiled"]) == 1
    own = pkg_root / "mine"
    user = _child(pkg_root, enable=True, PYTHONPYCACHEPREFIX=str(own))
    assert user["dir"] is None and user["prefix"] == str(own)
    assert not (pkg_root / "cache" / "pyc").exists()


def test_not_used_when_the_package_has_its_own_bytecode(pkg_root):
    import py_compile

    src = pkg_root / "site" / "nopyc_pkg" / "__init__.py"
    py_compile.compile(str(src), cfile=str(src.parent / "__pycache__" /
                                           f"__init__.{sys.implementation.cache_tag}.pyc"), doraise=True)
    r = _child(pkg_root, enable=True)
    assert r["dir"] is None and r["prefix"] is None and r["compiled"] == []


sandboxed = pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none",
                               reason=f"no sandbox here: {sandbox.resolve_mode('cpu')[1]}")

#: run in a sandboxed process: import nopyc_pkg (from the read-only cache), then try to
#: plant bytecode there
SANDBOXED = COUNTING + r"""
import nopyc_pkg
planted = []
for root, dirs, files in os.walk(sys.pycache_prefix):
    for f in files:
        try:
            with open(os.path.join(root, f), "r+b") as fh:
                fh.write(b"x")
            planted.append(f)
        except OSError as e:
            planted.append(f"refused: {e.errno}")
try:
    open(os.path.join(sys.pycache_prefix, "new.pyc"), "wb").close()
    planted.append("new.pyc")
except OSError as e:
    planted.append(f"refused: {e.errno}")
print(json.dumps({"prefix": sys.pycache_prefix, "dont_write": sys.dont_write_bytecode,
                  "compiled": compiled, "planted": planted, "value": nopyc_pkg.VALUE}))
"""


def _sandboxed_env(pkg_root: Path, monkeypatch) -> tuple[str, dict]:
    """(mode, environment) of a CPU worker as the harness builds them, the cache of
    ``pkg_root`` active and its site folder shown."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(pkg_root / "cache"))
    monkeypatch.setenv("SOLBENCH_SANDBOX_BIND", str(pkg_root / "site"))
    monkeypatch.setattr(bytecode, "_active", str(pkg_root / "cache" / "pyc"))
    mode = sandbox.resolve_mode("cpu")[0]
    env = sandbox.sandbox_env(sandbox.worker_env(os.environ), mode, None)
    env["PYTHONPATH"] = _pythonpath(pkg_root / "site")
    return mode, env


@sandboxed
def test_sandboxed_worker_reads_the_cache_and_cannot_write_it(pkg_root, monkeypatch):
    """The worker's view (sandbox.wrap, sandbox_env as the harness builds them): the cache at
    bytecode.MOUNT, read-only; the import reads the parent's bytecode and compiles nothing;
    every write is refused (EROFS), so nothing a candidate plants reaches a later process."""
    first = _child(pkg_root, enable=True)  # the parent's run fills the cache
    assert len(first["compiled"]) == 1
    mode, env = _sandboxed_env(pkg_root, monkeypatch)
    assert env["PYTHONPYCACHEPREFIX"] == bytecode.MOUNT
    argv = sandbox.wrap([sys.executable, "-c", SANDBOXED], "cpu", mode, None)
    # only the part of the cache that mirrors a folder the worker is shown (red team 25)
    site = str(pkg_root / "site")
    dest = bytecode.MOUNT + site
    assert ["--ro-bind", str(pkg_root / "cache" / "pyc") + site, dest] == \
        argv[argv.index(dest) - 2:argv.index(dest) + 1]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["prefix"] == bytecode.MOUNT and r["dont_write"] is True
    assert r["compiled"] == [] and r["value"] == 42
    assert r["planted"] and all(x == "refused: 30" for x in r["planted"]), r["planted"]  # EROFS


def test_no_cache_no_mount(monkeypatch):
    monkeypatch.setattr(bytecode, "_active", None)
    env = sandbox.sandbox_env({"PYTHONPYCACHEPREFIX": "/somewhere"}, "userns", None)
    assert "PYTHONPYCACHEPREFIX" not in env


#: in a sandboxed process: what the worker's build does to the prefix, then an import
AFTER_BUILD = COUNTING + r"""
from solbench.harness import build
build._private_pycache()
import nopyc_pkg
print(json.dumps({"prefix": sys.pycache_prefix, "compiled": compiled, "value": nopyc_pkg.VALUE}))
"""


@sandboxed
def test_after_the_build_a_sandboxed_worker_still_reads_the_parents_cache(pkg_root, monkeypatch):
    """The build moves the worker's bytecode to a private folder (nothing planted in a shared
    ``__pycache__`` can run), except where the sandbox shows the parent's cache read-only:
    what a worker imports after a candidate's build (torch.compile's, Triton's packages) is
    read from there, not compiled again."""
    _child(pkg_root, enable=True)  # the parent's run fills the cache
    mode, env = _sandboxed_env(pkg_root, monkeypatch)
    p = subprocess.run(sandbox.wrap([sys.executable, "-c", AFTER_BUILD], "cpu", mode, None), env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["prefix"] == bytecode.MOUNT and r["compiled"] == [] and r["value"] == 42


def test_the_build_keeps_only_a_read_only_cache(monkeypatch, tmp_path):
    """Outside a read-only mount (no sandbox: a folder of that name the candidate could
    write), the build's private folder is used as before."""
    from solbench.harness import build

    for ro, kept in ((True, True), (False, False)):
        monkeypatch.setattr(sys, "pycache_prefix", bytecode.MOUNT)
        monkeypatch.setattr(sys, "_solbench_pycache", None, raising=False)
        monkeypatch.setattr(build, "_read_only", lambda path, ro=ro: ro)
        build._private_pycache()
        assert (sys.pycache_prefix == bytecode.MOUNT) is kept
        if not kept:
            assert sys.pycache_prefix == sys._solbench_pycache and os.path.isdir(sys.pycache_prefix)
            os.rmdir(sys.pycache_prefix)


def test_want_guesses_what_a_candidates_worker_imports(monkeypatch):
    """From what the parent knows before the candidate runs: its languages, its sources as
    text, the device; nothing without an active cache; fill() compiles only what was noted
    (a command that ran only plain PyTorch candidates on the CPU compiles nothing)."""
    monkeypatch.setattr(bytecode, "_wanted", set())
    monkeypatch.setattr(bytecode, "_active", None)
    bytecode.want(["import triton"], ["triton"], "cuda")
    assert bytecode.wanted() == ()
    monkeypatch.setattr(bytecode, "_active", "/nonexistent-cache")
    bytecode.want(["import torch\ndef run(x):\n    return x.relu()\n"], ["pytorch"], "cpu")
    assert bytecode.wanted() == () and bytecode.fill() is None
    bytecode.want(["import torch"], ["triton"], "cpu")
    assert bytecode.wanted() == ("triton",)
    bytecode.want(["import torch\nf = torch.compile(g)\n"], ["pytorch"], "cuda:0")
    assert bytecode.wanted() == ("torch._dynamo", "torch._inductor", "sympy", "mpmath", "triton", "cupti")


def _use_cache(pkg_root: Path, monkeypatch) -> str:
    """``pkg_root``'s cache folder made this process's active cache and bytecode prefix, its
    site folder importable; returns the cache folder."""
    cache = str(pkg_root / "cache" / "pyc")
    monkeypatch.syspath_prepend(str(pkg_root / "site"))
    monkeypatch.setattr(bytecode, "_active", cache)
    monkeypatch.setattr(sys, "pycache_prefix", cache)
    return cache


def _pkg_with_modules(root: Path, n: int) -> Path:
    p = root / "site" / "nopyc_pkg"
    for i in range(n):
        (p / f"m{i}.py").write_text(f"X = {i}\n")
    return p


def test_fill_compiles_the_stale_sources_of_the_named_packages(pkg_root, monkeypatch):
    """bytecode.fill: every source of the package compiled into the cache (mirroring its path),
    nothing a second time, a changed source again; nothing without an active cache."""
    pkg = _pkg_with_modules(pkg_root, 3)
    cache = str(pkg_root / "cache" / "pyc")
    monkeypatch.syspath_prepend(str(pkg_root / "site"))
    monkeypatch.setattr(bytecode, "_active", None)
    assert bytecode.fill(("nopyc_pkg",)) is None
    monkeypatch.setattr(bytecode, "_active", cache)
    monkeypatch.setattr(sys, "pycache_prefix", cache)
    assert bytecode.package_dir("nopyc_pkg") == str(pkg)
    assert bytecode.package_dir("nopyc_pkg.nothing") is None and bytecode.package_dir("no_such_xyz") is None
    assert len(bytecode.stale_sources([str(pkg)])) == 4  # __init__ + 3 modules
    r = bytecode.fill(("nopyc_pkg", "no_such_xyz"), budget_s=60, jobs=1)
    assert r["files"] == 4 and r["left"] == 0, r
    tag = sys.implementation.cache_tag
    assert os.path.exists(f"{cache}{pkg}/m1.{tag}.pyc") and not (pkg / "__pycache__").exists()
    assert bytecode.fill(("nopyc_pkg",)) is None  # nothing stale
    mark = Path(cache) / f".filled-{sys.implementation.cache_tag}.json"
    assert mark.exists()  # a complete fill: later calls skip the walk while the folder is unchanged
    walks = []
    monkeypatch.setattr(bytecode, "stale_sources", lambda d, real=bytecode.stale_sources: walks.append(d) or real(d))
    assert bytecode.fill(("nopyc_pkg",)) is None and walks == []
    (pkg / "m9.py").write_text("X = 9\n")  # the folder changed (a reinstall, an upgrade)
    assert bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1) == {"files": 1, "left": 0, "given_up": False,
                                                                  "seconds": pytest.approx(0, abs=60)}
    src = pkg / "m2.py"
    st = os.stat(f"{cache}{pkg}/m2.{tag}.pyc")
    os.utime(src, (st.st_atime + 10, st.st_mtime + 10))
    assert bytecode.stale_sources([str(pkg)]) == [str(src)]  # an edit in place: seen by the walk
    mark.unlink()
    assert bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1)["left"] == 0


def test_fill_stops_at_its_budget_and_leaves_no_process(pkg_root, monkeypatch):
    """A budget too short for the work: what is left is said, and compileall's whole process
    group is gone (a later call compiles the rest)."""
    _pkg_with_modules(pkg_root, 400)
    cache = _use_cache(pkg_root, monkeypatch)
    spawned = []
    real = subprocess.Popen

    def popen(*a, **k):
        spawned.append(real(*a, **k))
        return spawned[-1]

    monkeypatch.setattr(bytecode.subprocess, "Popen", popen)
    r = bytecode.fill(("nopyc_pkg",), budget_s=0.01, jobs=2)
    assert r["files"] == 401 and 0 < r["left"] <= 401 and r["given_up"] is False, r
    assert not (Path(cache) / f".filled-{sys.implementation.cache_tag}.json").exists()  # retried next time
    (p,) = spawned
    assert p.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(p.pid, 0)  # no process of its group is left


def test_fill_runs_no_module_of_the_current_directory(pkg_root, monkeypatch, tmp_path):
    """Red team 26: ``python -m compileall`` put the cwd first on sys.path, so a
    ``compileall.py`` (or ``py_compile.py``, ``argparse.py`` ...) in the folder the user runs
    solbench from ran in the trusted parent: a candidate's own folder, for one
    (tests/harness/cand_red26_compileall.py). fill passes ``-P``."""
    _pkg_with_modules(pkg_root, 1)
    cache = _use_cache(pkg_root, monkeypatch)
    here = tmp_path / "candidate"
    here.mkdir()
    hostile = Path(__file__).parent / "harness" / "cand_red26_compileall.py"
    for name in ("compileall.py", "py_compile.py", "argparse.py"):
        shutil.copy(hostile, here / name)
    mark = tmp_path / "ran"
    monkeypatch.setenv("R26_MARK", str(mark))
    monkeypatch.chdir(here)
    r = bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1)
    assert not mark.exists(), mark.read_text()
    assert r["files"] == 2 and r["left"] == 0, r


#: a CLI run whose fill outlasts a Ctrl-C: solbench --version, "torch" imported, a slow package
CTRL_C_DRIVER = r"""
import sys, types
from solbench import bytecode
import solbench.cli as cli
bytecode._active = sys.argv[1]
sys.pycache_prefix = sys.argv[1]
sys.modules.setdefault("torch", types.ModuleType("torch"))
real = bytecode.fill
bytecode.fill = lambda: real(("slow_pkg",), budget_s=60, jobs=1)
sys.argv = ["solbench", "--version"]
cli.main()
"""


def test_ctrl_c_during_the_fill_ends_the_command_as_one(pkg_root):
    """Red team 26: a Ctrl-C while the fill ran at the end of a command (up to 2 s at every
    command until the cache is complete) came out of main as a KeyboardInterrupt traceback.
    It now ends as any interrupted command does: ``interrupted``, exit 130, no traceback, no
    compileall process left."""
    import signal
    import time

    pkg = pkg_root / "site" / "slow_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(40):  # about 0.3 s of compilation each
        (pkg / f"m{i}.py").write_text("X = [" + "i+1," * 150000 + "]\n")
    cache = pkg_root / "cache" / "pyc"
    cache.mkdir()
    env = dict(os.environ, PYTHONPATH=_pythonpath(pkg_root / "site"))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C_DRIVER, str(cache)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    kids: list[int] = []
    deadline = time.monotonic() + 60
    while not kids and time.monotonic() < deadline:
        time.sleep(0.05)
        for k in Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split():
            try:
                if "compileall" in Path(f"/proc/{k}/cmdline").read_text():
                    kids.append(int(k))
            except OSError:
                pass
    assert kids, "compileall never started"
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert "solbench" in out
    assert p.returncode == 130 and "Traceback" not in err and err.rstrip().endswith("interrupted"), (p.returncode, err[-2000:])
    time.sleep(0.5)
    for k in kids:
        assert not Path(f"/proc/{k}").exists() or "Z" in Path(f"/proc/{k}/stat").read_text().split(")")[-1][:3]


def test_a_source_that_never_compiles_is_not_retried_at_every_command(pkg_root, monkeypatch):
    """Red team 26: a source compileall cannot compile kept the mark from being written, so
    every command walked the packages and started compileall again; now a fill that went
    through the whole list marks, says what it gave up, and the next ones start nothing."""
    pkg = _pkg_with_modules(pkg_root, 1)
    (pkg / "legacy.py").write_text("print 'python 2 only'\n")
    cache = _use_cache(pkg_root, monkeypatch)
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(bytecode.subprocess, "Popen", lambda *a, **k: started.append(1) or real(*a, **k))
    first = bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1)
    assert first["files"] == 3 and first["left"] == 1 and first["given_up"] is True, first
    for _ in range(2):
        assert bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1) is None
    assert len(started) == 1, f"compileall started {len(started)} times for one uncompilable file"


def test_a_cache_that_takes_no_file_is_given_up_until_the_packages_change(pkg_root, monkeypatch):
    """No progress in a cache where no file can be created (a full disk, a quota): said once,
    marked, not retried at every command."""
    _pkg_with_modules(pkg_root, 2)
    cache = pkg_root / "cache" / "pyc"
    cache.mkdir()
    monkeypatch.syspath_prepend(str(pkg_root / "site"))
    monkeypatch.setattr(bytecode, "_active", str(cache))
    monkeypatch.setattr(sys, "pycache_prefix", str(cache))
    monkeypatch.setattr(bytecode, "_takes_files", lambda d: False)
    monkeypatch.setattr(bytecode, "_write_mark", lambda path, stamp: marks.append(path))
    real = subprocess.Popen
    # compileall that never gets to write (its budget spent before it starts)
    monkeypatch.setattr(bytecode.subprocess, "Popen",
                        lambda *a, **k: real([sys.executable, "-c", "import time; time.sleep(30)"], **k))
    marks = []
    r = bytecode.fill(("nopyc_pkg",), budget_s=0.5, jobs=1)
    assert r["left"] == r["files"] == 3 and r["given_up"] is True and len(marks) == 1, (r, marks)


def _strict_utf8_locale() -> str | None:
    """An installed UTF-8 locale other than C's (under which Python decodes stdin strictly),
    or None. CI generates en_US.UTF-8 (.ci/run)."""
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = [x for x in out.split() if x.lower().endswith((".utf8", ".utf-8")) and not x.startswith("C.")]
    return found[0] if found else None


@pytest.mark.parametrize("locale_kind", ["inherited", "strict-utf8"])
def test_fill_does_not_raise_on_a_file_name_that_is_not_utf8(pkg_root, monkeypatch, locale_kind):
    """Red team 26: ``"\\n".join(todo).encode()`` raised UnicodeEncodeError on a name os.walk
    decoded with surrogates (a venv under a Latin-1 home, a package file so named): out of
    the CLI's main after the command, a traceback and exit 1 in place of the command's own.
    Then, under a UTF-8 locale such as en_US.UTF-8 (not C.UTF-8), compileall decoded its list
    strictly and ended at that name before compiling anything: every file is compiled now."""
    if locale_kind == "strict-utf8":
        lc_all = _strict_utf8_locale()
        if lc_all is None:
            pytest.skip("no UTF-8 locale other than C.UTF-8 installed (locale -a)")
        monkeypatch.setenv("LC_ALL", lc_all)
    pkg = _pkg_with_modules(pkg_root, 1)
    (Path(os.fsdecode(bytes(pkg) + b"/caf\xe9.py"))).write_text("X = 1\n")
    cache = _use_cache(pkg_root, monkeypatch)
    r = bytecode.fill(("nopyc_pkg",), budget_s=60, jobs=1)
    assert r["files"] == 3 and r["left"] == 0 and not r["given_up"], r
