"""Code out of a model's reply: the fenced block to use, and whether it can be a candidate.

The reply is searched for fenced code blocks (```lang ... ```). Python targets take the
longest ``python``/``py`` block (else the longest unlabelled one) that defines the entry
(``ModelNew`` for KernelBench problems, ``run`` otherwise); CUDA takes the longest
``cuda``/``cpp``/``c++`` block. A reply with no block at all is tried whole as Python, as some
models omit the fence. Outcomes (:data:`STATUSES`):

* ``GENERATED``: code found, parses (Python) and names its entry;
* ``SYNTAX_ERROR``: Python code found that does not parse; it is still written as the
  candidate, so the evaluation records it (COMPILE_ERROR with the parser's line);
* ``NO_CODE``: nothing usable: no block, or no block naming the entry.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_PY = {"python", "py", "python3"}
_CU = {"cuda", "cu", "cpp", "c++", "cxx", "c"}


@dataclass
class Extracted:
    status: str  # GENERATED | SYNTAX_ERROR | NO_CODE
    code: str | None
    message: str


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def _defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
               for n in tree.body) or any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        for n in tree.body)


def extract_code(reply: str, entry: str, language: str) -> Extracted:
    """Pick the candidate code out of ``reply`` (module docstring). ``entry``: ``ModelNew``
    or ``run``; ``language``: ``pytorch``, ``triton`` or ``cuda``."""
    blocks = _blocks(reply or "")
    if language == "cuda" and entry == "run":
        cu = [c for lang, c in blocks if lang in _CU or (not lang and "PYBIND11_MODULE" in c)]
        cu = [c for c in cu if "PYBIND11_MODULE" in c] or cu
        if not cu:
            return Extracted("NO_CODE", None, "no ```cuda code block in the reply")
        code = max(cu, key=len)
        if "PYBIND11_MODULE" not in code:
            return Extracted("GENERATED", code, "CUDA block without PYBIND11_MODULE (the build will say)")
        return Extracted("GENERATED", code, f"CUDA block of {len(code.splitlines())} lines")
    py = [c for lang, c in blocks if lang in _PY] or [c for lang, c in blocks if not lang]
    if not blocks and (reply or "").strip():
        py = [reply]
    if not py:
        return Extracted("NO_CODE", None, "no ```python code block in the reply")
    parsed, broken = [], []
    for c in py:
        try:
            parsed.append((c, ast.parse(c)))
        except SyntaxError as e:
            broken.append((c, e))
    naming = [c for c, tree in parsed if _defines(tree, entry)]
    if naming:
        code = max(naming, key=len)
        return Extracted("GENERATED", code, f"{entry} defined, {len(code.splitlines())} lines")
    mentioning = [(c, e) for c, e in broken if entry in c]
    if mentioning:
        code, e = max(mentioning, key=lambda x: len(x[0]))
        return Extracted("SYNTAX_ERROR", code, f"line {e.lineno}: {e.msg}")
    if not blocks:
        return Extracted("NO_CODE", None, "no code block in the reply")
    return Extracted("NO_CODE", None, f"no code block defines {entry}")
