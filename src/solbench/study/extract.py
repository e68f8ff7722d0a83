"""Code out of a model's reply: the fenced block to use, and whether it can be a candidate.

The reply is searched for fenced code blocks (```lang ... ```, ````lang ... ```` or ~~~, closed
by a line of the opening fence). Python targets take the longest ``python``/``py`` block that
defines the entry, else the longest unlabelled one that does
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

# An opening fence is a run of 3+ backticks or tildes (CommonMark), here also found mid-line, as
# models write one after a sentence; it closes only at a line of the same character at least as
# long (so a ``` inside the code, e.g. in a comment or a string, does not cut it), or at the end
# (a reply cut at max_tokens).
_FENCE = re.compile(r"(?P<f>(?P<c>[`~])(?P=c){2,})[ \t]*(?P<lang>[A-Za-z0-9_+.\-]*)[^\n]*\n"
                    r"(?P<body>.*?)(?:^[ \t]{0,3}(?P=f)(?P=c)*[ \t]*$|\Z)", re.S | re.M)
_PY = {"python", "py", "python3"}
_CU = {"cuda", "cu", "cpp", "c++", "cxx", "c"}


@dataclass
class Extracted:
    status: str  # GENERATED | SYNTAX_ERROR | NO_CODE
    code: str | None
    message: str


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]


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
    # python-labelled blocks first, then unlabelled ones: a reply whose labelled block is a
    # usage example and whose kernel sits in an unlabelled (or ````-fenced) block is no NO_CODE
    groups = [[c for lang, c in blocks if lang in _PY], [c for lang, c in blocks if not lang]]
    if not blocks and (reply or "").strip():
        groups = [[reply]]
    if not any(groups):
        return Extracted("NO_CODE", None, "no ```python code block in the reply")
    broken: list[list[tuple[str, SyntaxError]]] = []
    for group in groups:
        parsed, bad = [], []
        for c in group:
            try:
                parsed.append((c, ast.parse(c)))
            except SyntaxError as e:
                bad.append((c, e))
        broken.append(bad)
        naming = [c for c, tree in parsed if _defines(tree, entry)]
        if naming:
            code = max(naming, key=len)
            return Extracted("GENERATED", code, f"{entry} defined, {len(code.splitlines())} lines")
    for bad in broken:
        mentioning = [(c, e) for c, e in bad if entry in c]
        if mentioning:
            code, e = max(mentioning, key=lambda x: len(x[0]))
            return Extracted("SYNTAX_ERROR", code, f"line {e.lineno}: {e.msg}")
    if not blocks:
        return Extracted("NO_CODE", None, "no code block in the reply")
    return Extracted("NO_CODE", None, f"no code block defines {entry}")
