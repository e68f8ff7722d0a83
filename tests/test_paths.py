"""Every ``SOLBENCH_*`` variable is declared and read in solbench.paths only, and
docs/configuration.md is the page paths.py generates (so the two cannot drift)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from solbench import paths

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "solbench"

#: files other work owns that still read SOLBENCH_* variables themselves: each is switched
#: to solbench.paths when that work lands (then its line here goes; a stale line fails)
PENDING: dict[str, set[str]] = {}

_ENV_METHODS = {"get", "pop", "setdefault", "__getitem__"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "SOLBENCH_..."`` assignments (a read through a constant counts)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def env_reads(source: str) -> set[str]:
    """Names of the SOLBENCH_* variables ``source`` reads from the process environment:
    ``os.environ[X]`` (load), ``os.environ.get/pop/setdefault(X)``, ``os.getenv(X)``,
    ``X in os.environ``, with X a string literal or a module constant holding one.
    Writes (``env[X] = ...`` of a child's environment, ``os.environ[X] = ...``) are not reads."""
    tree = ast.parse(source)
    consts = _constants(tree)

    def name_of(arg: ast.AST) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            v = arg.value
        elif isinstance(arg, ast.Name) and arg.id in consts:
            v = consts[arg.id]
        else:
            return None
        return v if v.startswith("SOLBENCH_") else None

    found: set[str] = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            if (f.attr in _ENV_METHODS and _is_environ(f.value)) or \
                    (f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os"):
                key = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getenv" \
                and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and _is_environ(node.comparators[0]):
            key = node.left
        name = name_of(key) if key is not None else None
        if name:
            found.add(name)
    return found


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def test_the_reader_finds_each_form_of_read():
    """The scan is what the source test relies on: every form of read is found, writes are not."""
    src = '''
import os
from os import environ, getenv
K = "SOLBENCH_K"
a = os.environ.get("SOLBENCH_A", "1")
b = os.environ["SOLBENCH_B"]
c = os.environ.pop("SOLBENCH_C", None)
d = os.getenv("SOLBENCH_D")
e = os.environ.get(K)
f = "SOLBENCH_F" in os.environ
g = environ.get("SOLBENCH_G")
h = getenv("SOLBENCH_H")
os.environ["SOLBENCH_W"] = "1"
env = {}
env["SOLBENCH_X"] = "1"
other = os.environ.get("HOME")
'''
    assert env_reads(src) == {"SOLBENCH_A", "SOLBENCH_B", "SOLBENCH_C", "SOLBENCH_D", "SOLBENCH_K",
                              "SOLBENCH_F", "SOLBENCH_G", "SOLBENCH_H"}


def test_no_module_but_paths_reads_a_solbench_variable():
    reads = {f: env_reads(s) for f, s in _sources().items() if f != "paths.py"}
    offenders = {f: sorted(r) for f, r in reads.items() if r and f not in PENDING}
    assert not offenders, (f"read SOLBENCH_* variables through solbench.paths (declare them there; "
                           f"docs/configuration.md): {offenders}")
    for f, names in PENDING.items():
        assert reads.get(f, set()) <= names, f"{f}: reads {sorted(reads[f] - names)} beyond its pending list"
        assert reads.get(f), f"{f} no longer reads a SOLBENCH_* variable: remove it from PENDING"


def test_every_solbench_variable_named_in_the_sources_is_declared():
    """A variable named anywhere in src/ (read, set for a child, or documented) is declared in
    paths.VARIABLES, so docs/configuration.md lists it."""
    named = set()
    for f, s in _sources().items():
        named |= set(re.findall(r"(?<![A-Za-z0-9_])SOLBENCH_[A-Z0-9_]*[A-Z0-9]", s))
    assert named - set(paths.VARIABLES) == set()
    assert set(paths.VARIABLES) - named == set(), "declared but never named in src/: drop it"


def test_undeclared_name_is_refused():
    with pytest.raises(KeyError, match="SOLBENCH_NOT_DECLARED"):
        paths._raw("SOLBENCH_NOT_DECLARED")


def test_configuration_page_is_generated_from_paths():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == paths.configuration_doc(), \
        "docs/configuration.md is stale: python -m solbench.paths > docs/configuration.md"
    for name in paths.VARIABLES:
        assert f"`{name}`" in page


def test_accessors_follow_the_environment(monkeypatch, tmp_path):
    """Values worked out by hand from the rules in paths.py's docstrings."""
    for v in paths.VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    assert paths.data_dir() == tmp_path / "xdg" / "solbench"
    assert paths.sol_cache_dir() == tmp_path / "xc" / "solbench" / "sol-counts"
    assert paths.sandbox_wanted() == "auto" and paths.sandbox_net_private() and paths.sandbox_seccomp()
    assert paths.sandbox_uid_base() == 64000 and paths.sandbox_tmpfs_bytes() == 8 * 1024 ** 3
    assert paths.sandbox_nproc() is None and paths.input_threads() is None
    assert paths.memguard_on() and paths.cuda_slot_pool() and not paths.sol_in_process()
    assert paths.sol_count_timeout_s() == 300.0 and paths.worker_preroll_s() == 0.0
    assert paths.sandbox_as_bytes(5) == 5 and paths.pop_sandbox_uid() is None

    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("SOLBENCH_SOL_CACHE", " Off ")
    monkeypatch.setenv("SOLBENCH_SANDBOX", " UID ")
    monkeypatch.setenv("SOLBENCH_SANDBOX_NET", "0")
    monkeypatch.setenv("SOLBENCH_SANDBOX_SECCOMP", "yes")  # only "1" turns it on
    monkeypatch.setenv("SOLBENCH_TRACE_KEYS", f"a{os.pathsep}{os.pathsep}b")
    monkeypatch.setenv("SOLBENCH_WORKER_PREROLL_US", "25000")  # clamped to 10 ms
    monkeypatch.setenv("SOLBENCH_SANDBOX_UID", "64007")
    monkeypatch.setenv("SOLBENCH_MEMGUARD", "off")
    assert paths.data_dir() == tmp_path / "keys"
    assert paths.sol_cache_dir() is None
    assert paths.sandbox_wanted() == "uid" and not paths.sandbox_net_private() and not paths.sandbox_seccomp()
    assert paths.trace_key_files() == ["a", "b"]
    assert paths.worker_preroll_s() == 0.01
    assert paths.pop_sandbox_uid() == 64007 and "SOLBENCH_SANDBOX_UID" not in os.environ
    assert not paths.memguard_on()


def test_paths_imports_nothing_of_solbench():
    """The worker and the SOL child read it first: it stays at the bottom of the layers."""
    tree = ast.parse((SRC / "paths.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("solbench"), ast.dump(node)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("solbench") for a in node.names)
