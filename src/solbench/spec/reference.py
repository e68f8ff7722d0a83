"""Import a definition's reference source from a real file (decorators read their source)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

_CACHE: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Directory for generated files (``$SOLBENCH_CACHE`` or ``~/.cache/solbench``)."""
    base = os.environ.get("SOLBENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "solbench"
    )
    p = Path(base)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError:
        p = Path(tempfile.gettempdir()) / "solbench-cache"
        p.mkdir(parents=True, exist_ok=True)
    return p


def import_source(source: str, stem: str = "ref") -> ModuleType:
    """Write ``source`` to ``<cache>/refs/<stem>_<sha12>.py`` and import it as a module.

    The same text always maps to the same module object within a process.
    Raises whatever the module raises at import (SyntaxError, ImportError, ...).
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    if digest in _CACHE:
        return _CACHE[digest]
    d = cache_dir() / "refs"
    d.mkdir(parents=True, exist_ok=True)
    safe_stem = "".join(c if c.isalnum() else "_" for c in stem)[:40]
    path = d / f"{safe_stem}_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    mod = import_file(path, f"solbench_ref_{safe_stem}_{digest}")
    _CACHE[digest] = mod
    return mod


def import_file(path: str | Path, module_name: str | None = None) -> ModuleType:
    """Import a Python file under a unique module name (registered in sys.modules)."""
    path = Path(path).resolve()
    name = module_name or "solbench_file_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod
