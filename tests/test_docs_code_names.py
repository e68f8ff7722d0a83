"""The code the documentation names exists, under the name it has now.

A reader follows a dotted name (``solbench.run.session.evaluate_and_score``) or a repository
path (``tests/suites/test_l1_suite.py``, ``harness/verdict.py``) from docs/ or README.md to the
code. Every dotted ``solbench.*`` name must import (a module, then attributes), no page may
send the reader to a module that only re-exports names for old callers (its code lives
elsewhere), and every ``.py`` path under this repository's folders (src/solbench's packages,
tests/, bench/) must be a file. Paths of upstream projects (``sol_execbench/...``, SOLAR's
``scripts/...``) are not checked.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "solbench"
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])

#: modules kept only so that old imports work; a page names where the code lives instead
REEXPORT_ONLY = ("solbench.pipeline", "solbench.suites.executors")

DOTTED = re.compile(r"(?<![\w./])solbench(?:\.[A-Za-z_]\w*)+")
PY_PATH = re.compile(r"(?<![\w./\-])((?:[\w\-]+/)+[\w\-]+\.py)\b")


def _mentions(pattern: re.Pattern):
    """(page:line, the match's last group or the whole match) for every match on every page."""
    for page in PAGES:
        for lineno, line in enumerate(page.read_text().splitlines(), 1):
            for m in pattern.finditer(line):
                yield f"{page.relative_to(ROOT)}:{lineno}", m.group(m.lastindex or 0)


def resolve(name: str) -> str | None:
    """None when ``name`` (``solbench.a.b.attr``) imports, else what is missing."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
            break
        except ModuleNotFoundError:
            continue
    else:
        return f"no module {parts[0]}"
    for attr in parts[k:]:
        if not hasattr(obj, attr):
            return f"{'.'.join(parts[:k])} has no {attr}"
        obj = getattr(obj, attr)
    return None


def _repo_roots() -> set[str]:
    """First path components that mean this repository: its top folders and src/solbench's
    packages (docs write ``harness/verdict.py`` for src/solbench/harness/verdict.py)."""
    return {"src", "tests", "bench"} | {p.name for p in PKG.iterdir() if p.is_dir()
                                        and (p / "__init__.py").exists()}


def path_exists(path: str) -> bool:
    return any(c.is_file() for c in (ROOT / path, PKG / path, ROOT / "src" / path))


def test_every_dotted_solbench_name_imports():
    bad = [f"{where}: {name}: {why}" for where, name in _mentions(DOTTED)
           if (why := resolve(name)) is not None]
    assert not bad, "\n".join(bad)


def test_no_page_names_a_reexport_only_module():
    bad = [f"{where}: {name}" for where, name in _mentions(DOTTED)
           if any(name == m or name.startswith(m + ".") for m in REEXPORT_ONLY)]
    assert not bad, "name the module the code lives in:\n" + "\n".join(bad)


def test_every_repository_py_path_is_a_file():
    roots = _repo_roots()
    bad = [f"{where}: {path}" for where, path in _mentions(PY_PATH)
           if path.split("/")[0] in roots and not path_exists(path)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name, ok", [
    ("solbench.run.session.evaluate_and_score", True),
    ("solbench.harness.verdict.judge", True),
    ("solbench.harness.seeds", False),          # removed alias module
    ("solbench.run.session.no_such_function", False),
])
def test_resolve(name, ok):
    assert (resolve(name) is None) is ok


@pytest.mark.parametrize("path, ok", [
    ("harness/verdict.py", True),
    ("tests/suites/test_l1_suite.py", True),
    ("tests/suites/test_l1_problems.py", False),
    ("store/db.py", False),
])
def test_path_exists(path, ok):
    assert path_exists(path) is ok
