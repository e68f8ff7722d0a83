"""Import a definition's reference source: compiled from the text in memory, with a copy on
disk and in ``linecache`` for code that reads its own source."""

from __future__ import annotations

import hashlib
import linecache
import os
import sys
from pathlib import Path
from types import ModuleType

from .. import paths

_CACHE: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Directory for generated files (``$SOLBENCH_CACHE`` or ``~/.cache/solbench``):
    :func:`solbench.paths.cache_dir`."""
    return paths.cache_dir()


def import_source(source: str, stem: str = "ref") -> ModuleType:
    """Import ``source`` as a module, executing the text given here and nothing read back.

    The text is also written to ``<cache>/refs/<stem>_<sha12>.py`` and registered with
    ``linecache`` under that name, so code that reads its own source (``inspect``, decorators
    such as ``triton.jit``, tracebacks) finds it; but the module is compiled from ``source``
    itself, never from that file or a ``__pycache__`` entry. The cache directory is writable
    by every process of this user, candidates included: a planted ``.pyc`` or an edited file
    must not change what the trusted parent runs as the reference.

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
    try:
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
    except OSError:
        pass  # the file is a convenience for tools that read it; the module does not need it
    mod = module_from_text(path.resolve(), f"solbench_ref_{safe_stem}_{digest}", source)
    _CACHE[digest] = mod
    return mod


def forget_source(source: str) -> None:
    """Drop the module :func:`import_source` made of ``source`` in this process: the next
    import of that text executes it anew (fresh module-level state)."""
    _CACHE.pop(hashlib.sha256(source.encode()).hexdigest()[:16], None)


def register_source(filename: str | Path, text: str) -> None:
    """Serve ``text`` as the source of ``filename`` to ``linecache`` (so ``inspect``,
    ``triton.jit`` and tracebacks read this text, not whatever the file holds now)."""
    fn = str(filename)
    linecache.cache[fn] = (len(text), None, text.splitlines(True), fn)


def module_from_text(filename: str | Path, name: str, text: str) -> ModuleType:
    """Module ``name`` (registered in ``sys.modules``) with ``__file__`` = ``filename``,
    compiled from ``text`` itself: no file and no ``__pycache__`` entry is read, so nothing
    another process of this user wrote there runs. Raises whatever the module raises."""
    register_source(filename, text)
    code = compile(text, str(filename), "exec", dont_inherit=True)
    mod = ModuleType(name)
    mod.__file__ = str(filename)
    sys.modules[name] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102 - the text the caller holds and trusts to run
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod
