"""The layers of docs/architecture.md hold: the import-linter contracts of pyproject.toml
([tool.importlinter]) are kept by src/solbench, and break on a copy of it given an upward
import (one at module level, one hidden inside a function), a reach into the harness's
internals, an import between the independent sol and harness layers, or worker-side harness
code (what the candidate's worker runs) reaching the harness's parent side."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def test_import_linter_is_installed():
    """CI enforces the layers only where import-linter runs: its absence fails, never skips."""
    import importlib.util

    assert importlib.util.find_spec("importlinter"), \
        "import-linter is missing: bash scripts/install.sh test (pyproject.toml's test extra)"


def lint(src: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's contracts over the ``solbench`` package under
    ``src`` (a child process, so that package, not an installed one, is the one analysed)."""
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True, no_logo=True))")
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run([sys.executable, "-c", code], cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """A copy of the package's Python sources (what the contracts read)."""
    dst = tmp_path_factory.mktemp("layers") / "src"
    shutil.copytree(ROOT / "src" / "solbench", dst / "solbench",
                    ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or
                                                                   os.path.isdir(os.path.join(d, n)))])
    return dst


def _with(copy: Path, rel: str, text: str):
    """Context: ``text`` appended to ``solbench/rel`` of the copy, removed afterwards."""

    @contextlib.contextmanager
    def cm():
        f = copy / "solbench" / rel
        before = f.read_text()
        f.write_text(before + "\n" + text + "\n")
        try:
            yield
        finally:
            f.write_text(before)
    return cm()


def test_contracts_are_kept():
    r = lint(ROOT / "src")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_the_copy_is_kept_before_a_change(copy):
    r = lint(copy)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("rel, text, expect", [
    # spec at the bottom imports nothing above it (the import that was there: languages in harness)
    ("spec/solution.py", "from ..harness import build as _b", "solbench.spec is not allowed to import solbench.harness"),
    # hidden in a function: still an import, still upward
    ("store/__init__.py", "def _late():\n    from ..report import tables\n    return tables",
     "solbench.store is not allowed to import solbench.report"),
    ("harness/sandbox.py", "from ..store import auth as _a", "solbench.harness is not allowed to import solbench.store"),
    # sol and harness are independent layers
    ("sol/score.py", "from ..harness import evaluator as _e", "solbench.sol is not allowed to import solbench.harness"),
    # integrity reads the harness's public surface, not its rounds module
    ("integrity/screen.py", "from ..harness.rounds import round_name", "Illegal imports of protected package solbench.harness.rounds"),
    ("paths.py", "from . import errors as _e", "solbench.paths is not allowed to import solbench.errors"),
    # code of the candidate's worker never reaches the harness's parent side, even through a
    # worker-side module (the worker imports pages), nor input generation
    ("harness/pages.py", "def _late():\n    from .evaluator import evaluate\n    return evaluate",
     "solbench.harness.worker is not allowed to import solbench.harness.evaluator"),
    ("harness/protocol.py", "from .process import WorkerHandle as _W",
     "solbench.harness.protocol is not allowed to import solbench.harness.process"),
    ("harness/memguard.py", "from ..inputs import seeds as _s", "solbench.harness.memguard is not allowed to import solbench.inputs"),
])
def test_an_upward_import_breaks_the_contract(copy, rel, text, expect):
    with _with(copy, rel, text):
        r = lint(copy)
    assert r.returncode == 1, r.stdout + r.stderr
    assert expect in " ".join(r.stdout.split()), r.stdout


def test_every_harness_module_is_worker_side_or_parent_side():
    """The worker-side contract lists each harness module once, as code the candidate's worker
    runs or as the parent's own: a new module must be placed."""
    import tomllib

    cfg = tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"]
    c = next(c for c in cfg if c["id"] == "worker-side")
    worker, parent = set(c["source_modules"]), {m for m in c["forbidden_modules"] if ".harness." in m}
    assert not worker & parent
    have = {f"solbench.harness.{f.stem}" for f in (ROOT / "src" / "solbench" / "harness").glob("*.py")
            if f.stem != "__init__"}
    assert have == worker | parent, (sorted(have - worker - parent), sorted(worker | parent - have))


def test_a_new_package_must_be_placed_in_a_layer(copy):
    pkg = copy / "solbench" / "newpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    try:
        r = lint(copy)
    finally:
        shutil.rmtree(pkg)
    assert r.returncode == 1 and "solbench.newpkg" in r.stdout, r.stdout
