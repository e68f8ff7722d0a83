"""Loading problems (a definition directory or a KernelBench .py) and solutions.

A :class:`Problem` is what every later stage consumes: a validated :class:`Definition`,
its :class:`Workload` list, and a way to build the trusted reference callable.
KernelBench files are adapted into the same shape (see :mod:`solbench.spec.kernelbench`).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from .. import paths
from ..errors import ConstraintError, SpecError
from .definition import Definition
from .reference import import_source
from .solution import Solution
from .workload import CustomInput, SafetensorsInput, ScalarInput, Workload

#: held around every draw from torch's process-global generators that a seed must fix
#: (``torch.manual_seed`` then the draws): a custom-input entrypoint (``inputs.generate``) and
#: a KernelBench Model's initialisation (:meth:`Problem.make_reference`). The parent makes
#: input sets on more than one thread (the reference's warm-up set, ``harness.workers``),
#: and draws of two threads interleaved give neither its seed's values
GLOBAL_RNG_LOCK = threading.RLock()


def _fmt_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # drop pydantic's union tags ("const", "function-after[...]")
            if part in ("const", "var", "expr", "random", "scalar", "safetensors", "custom"):
                continue
            if "[" in str(part) and "(" in str(part):
                continue
            out += ("." if out else "") + str(part)
    return out


def spec_error_from_validation(path: Path | str, err: ValidationError, prefix: str = "") -> SpecError:
    """Turn the first pydantic error into a one-line SpecError naming file and field."""
    e = err.errors()[0]
    loc = _fmt_loc(tuple(e.get("loc", ())))
    msg = e.get("msg", "invalid")
    if e.get("type") == "extra_forbidden":
        msg = "unknown key (not part of the format)"
    more = len(err.errors()) - 1
    if more:
        msg += f" (and {more} more error{'s' if more > 1 else ''})"
    fld = ".".join(x for x in (prefix, loc) if x)
    return SpecError(path, fld, msg)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(path, "", "file not found") from None
    except json.JSONDecodeError as e:
        raise SpecError(path, f"line {e.lineno}", f"invalid JSON: {e.msg}") from None


@dataclass
class Problem:
    """A loaded, validated problem.

    Attributes:
        definition: the validated definition.
        workloads: its workloads in file order.
        path: the problem directory or KernelBench file.
        kind: "definition" or "kernelbench".
        init_args: constructor arguments for class-style entry points (KernelBench
            ``get_init_inputs()``; empty for definition problems).
        init_seed: RNG seed set before constructing the reference and candidate modules.
    """

    definition: Definition
    workloads: list[Workload]
    path: Path
    kind: str = "definition"
    init_args: tuple = ()
    init_seed: int = 42
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def suite(self) -> str | None:
        """The suite the problem belongs to: its definition's ``suite:`` tag (solbench's own
        suites tag every problem, ``suite:l1``), else the name of the folder that holds it (the
        subset in SOL-ExecBench's ``<subset>/<name>/`` layout, ``L1``; the level of a
        KernelBench file, ``level1``); None for a problem at the file system's root."""
        for t in self.definition.tags or []:
            if t.startswith("suite:") and t[len("suite:"):].strip():
                return t[len("suite:"):].strip()
        return self.path.resolve().parent.name or None

    def reference_module(self):
        """The imported reference module (from a real file)."""
        return import_source(self.definition.reference, stem=self.name)

    def make_reference(self, device: str) -> Callable[..., Any]:
        """A callable computing the reference outputs for inputs given in definition order.

        For definition problems: the reference's ``run``. For KernelBench: ``Model`` built
        with ``init_seed`` and moved to ``device``.
        """
        mod = self.reference_module()
        if self.kind == "kernelbench":
            import torch

            with GLOBAL_RNG_LOCK:  # no other thread draws between the seed and the layers
                torch.manual_seed(self.init_seed)
                model = mod.Model(*self.init_args).to(device)
            model.eval()
            return model
        fn = getattr(mod, "run", None)
        if fn is None:
            raise SpecError(self.path, "reference", "defines no top-level run(...)")
        return fn

    def workload(self, key: str | int) -> Workload:
        if isinstance(key, int):
            return self.workloads[key]
        for w in self.workloads:  # an exact uuid wins over a prefix of a longer one
            if w.uuid == key:
                return w
        for w in self.workloads:
            if w.uuid.startswith(key):
                return w
        raise KeyError(key)

    def workload_bytes(self, w: Workload) -> int:
        """Bytes of all declared inputs and outputs of ``w`` (from shapes; scalars count 8).
        Needs no torch (:data:`~.dtypes.STORAGE_BYTES`)."""
        from .dtypes import STORAGE_BYTES

        env = self.definition.resolve_axes(w.axes)
        total = 0
        for spec in list(self.definition.inputs.values()) + list(self.definition.outputs.values()):
            shape = self.definition.shape_of(spec, env)
            if shape is None:
                total += 8
                continue
            n = 1
            for d in shape:
                n *= d
            total += n * STORAGE_BYTES[spec.dtype]
        return total

    def smallest_workloads(self, k: int = 1, max_bytes: int | None = None) -> list[Workload]:
        """The ``k`` workloads with the fewest declared bytes (ties keep file order),
        optionally only those under ``max_bytes``."""
        ranked = sorted(self.workloads, key=self.workload_bytes)
        if max_bytes is not None:
            ranked = [w for w in ranked if self.workload_bytes(w) <= max_bytes]
        return ranked[:k]

    def missing_blobs(self) -> list[tuple[str, str, str]]:
        """(workload uuid, input name, path) for each safetensors blob not on disk."""
        out = []
        for w in self.workloads:
            for name, src in w.inputs.items():
                if isinstance(src, SafetensorsInput) and find_blob(self, src.path) is None:
                    out.append((w.uuid, name, src.path))
        return out


def find_blob(problem: Problem, rel_path: str) -> Path | None:
    """Locate a workload's safetensors blob ``rel_path``: under the problem's folder (the
    folder of a single-file problem), then under ``$FLASHINFER_TRACE_DIR``
    (:func:`solbench.paths.flashinfer_trace_dir`); None when neither holds a file there."""
    bases = [Path(problem.path) if Path(problem.path).is_dir() else Path(problem.path).parent]
    extra = paths.flashinfer_trace_dir()
    if extra is not None:
        bases.append(extra)
    for b in bases:
        p = b / rel_path
        if p.is_file():
            return p
    return None


#: upstream SOL-ExecBench quirks the loader accepts with a warning (``strict`` rejects them):
#: ``axis_input``: a workload axis that the definition declares as an input (L2/032), passed
#: to the custom-inputs entrypoint with the axes and, when the workload gives the input no
#: source, used as its scalar value; ``extra_input``: a workload input the definition lacks
#: (L2/068), which upstream ignores and so is dropped
QUIRKS = ("axis_input", "extra_input")

_log = logging.getLogger("solbench.spec")


def check_workload(defn: Definition, w: Workload, path: Path | str, lineno: int, *,
                   strict: bool = False) -> tuple[Workload, list[str]]:
    """Check one workload against its definition.

    Returns the workload (without inputs the definition lacks) and one warning line per
    accepted upstream quirk (:data:`QUIRKS`), each naming the file and field.

    Raises:
        SpecError / ConstraintError: the workload is invalid, or ``strict`` and it relies on a
        quirk.
    """
    where = f"line {lineno}"
    quirks: list[str] = []
    axis_inputs = [k for k in w.axes if k not in defn.axes and k in defn.inputs]
    for k in axis_inputs:
        msg = (f"axis {k!r} is an input of the definition, not an axis (accepted as upstream "
               f"does: passed to the inputs with the axes; workload {w.uuid})")
        if strict:
            raise SpecError(path, f"{where}.axes.{k}", msg.split(" (accepted")[0] + f" (workload {w.uuid})")
        quirks.append(f"{path}: {where}.axes.{k}: {msg}")
    try:
        defn.resolve_axes(w.axes)
    except ValueError as e:
        cls = ConstraintError if "constraints" in str(e) else SpecError
        raise cls(path, where, f"{e} (workload {w.uuid})") from None
    missing = [k for k in defn.inputs if k not in w.inputs]
    given_as_axis = [k for k in missing if k in axis_inputs]
    if given_as_axis:
        # a custom workload's entrypoint makes it (it receives the axes); otherwise the value
        w = w.model_copy(update={"inputs": {**w.inputs, **{
            k: CustomInput(type="custom") if w.is_custom else ScalarInput(type="scalar", value=w.axes[k])
            for k in given_as_axis}}})
        missing = [k for k in missing if k not in given_as_axis]
    extra = [k for k in w.inputs if k not in defn.inputs]
    if missing:
        raise SpecError(path, f"{where}.inputs", f"no source for inputs {missing} (workload {w.uuid})")
    if extra:
        if strict:
            raise SpecError(path, f"{where}.inputs", f"unknown inputs {extra} (workload {w.uuid})")
        quirks.append(f"{path}: {where}.inputs: unknown inputs {extra} ignored, as upstream does "
                      f"(workload {w.uuid})")
        w = w.model_copy(update={"inputs": {k: v for k, v in w.inputs.items() if k in defn.inputs}})
    if w.is_custom and not defn.custom_inputs_entrypoint:
        raise SpecError(
            path, f"{where}.inputs",
            "custom inputs need the definition's custom_inputs_entrypoint",
        )
    for k, src in w.inputs.items():
        if isinstance(src, ScalarInput) and defn.inputs[k].shape not in (None, []):
            raise SpecError(path, f"{where}.inputs.{k}", "a scalar source for a tensor input")
    return w, quirks


def reference_signature_issue(defn: Definition) -> str | None:
    """What differs between the reference's ``run`` parameters and the definition's inputs,
    read statically (``ast``, nothing is run); None when they agree. The harness passes the
    inputs in the definition's order, so ``run``'s leading parameters must be the inputs'
    names in that order; further parameters need defaults; ``*args`` takes any rest. A
    ``run`` that is not a plain top-level ``def`` (an assignment, a decorator factory's
    product) is not checked."""
    import ast

    try:
        tree = ast.parse(defn.reference)
    except SyntaxError:
        return None  # check_reference reports it
    fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "run"]
    if not fns:
        return None
    a = fns[-1].args
    pos = [x.arg for x in a.posonlyargs + a.args]
    n_default = len(a.defaults)
    required = pos[: len(pos) - n_default] if n_default else pos
    want = list(defn.inputs)
    sig = f"run({', '.join(pos + (['*' + a.vararg.arg] if a.vararg else []))})"
    inputs = f"inputs ({', '.join(want)})"
    if len(pos) < len(want) and a.vararg is None:
        return (f"{sig} takes {len(pos)} positional parameter(s), the definition has {len(want)} "
                f"{inputs}")
    head = pos[: len(want)]
    if head != want[: len(head)]:
        if sorted(head) == sorted(want[: len(head)]) and len(head) == len(want):
            return f"{sig} names the {inputs} in another order (the harness passes them in the definition's order)"
        diff = [f"parameter {i + 1} is {p!r}, input {i + 1} is {w!r}"
                for i, (p, w) in enumerate(zip(head, want)) if p != w]
        return f"{sig} does not match the definition's {inputs}: " + "; ".join(diff)
    extra = required[len(want):]
    if extra:
        return f"{sig} has parameter(s) {', '.join(extra)} beyond the {inputs} without a default"
    kwonly = [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    if kwonly:
        return f"{sig} has keyword-only parameter(s) {', '.join(kwonly)} without a default"
    return None


def check_reference(defn: Definition, path: Path | str) -> None:
    """The reference must parse and define ``run`` (and the custom inputs entrypoint when one
    is named) at top level, without running it. Raises SpecError."""
    import ast

    try:
        tree = ast.parse(defn.reference)
    except SyntaxError as e:
        raise SpecError(path, "reference", f"syntax error at line {e.lineno}: {e.msg}") from None
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "run" not in top:
        raise SpecError(path, "reference", "defines no top-level run(...)")
    ep = defn.custom_inputs_entrypoint
    if ep and ep not in top:
        raise SpecError(path, "custom_inputs_entrypoint", f"{ep!r} is not defined in the reference")


def load_definition(path: str | Path) -> Definition:
    path = Path(path)
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise SpecError(path, "", "expected a JSON object")
    try:
        defn = Definition.model_validate(raw)
    except ValidationError as e:
        raise spec_error_from_validation(path, e) from None
    return defn


def load_workloads(path: str | Path, defn: Definition, *, strict: bool = False,
                   quirks: list[str] | None = None) -> list[Workload]:
    """Every workload of ``path`` (workload.jsonl), checked against ``defn``.

    Upstream quirks (:data:`QUIRKS`) are accepted, each logged as one warning line naming the
    file and field (and appended to ``quirks`` when given); ``strict`` rejects them.

    Raises SpecError naming the first bad line and field; when other lines are bad too, the
    message lists them (so a user fixes them in one pass, not one run per line)."""
    path = Path(path)
    if not path.exists():
        raise SpecError(path, "", "file not found")
    out: list[Workload] = []
    seen: set[str] = set()
    errors: list[SpecError] = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as e:
                raise SpecError(path, f"line {i}", f"invalid JSON: {e.msg}") from None
            try:
                w = Workload.model_validate(raw)
            except ValidationError as e:
                raise spec_error_from_validation(path, e, prefix=f"line {i}") from None
            if w.uuid in seen:
                raise SpecError(path, f"line {i}.uuid", f"duplicate uuid {w.uuid}")
            seen.add(w.uuid)
            w, found = check_workload(defn, w, path, i, strict=strict)
            for q in found:
                _log.warning("warning: %s", q)
            if quirks is not None:
                quirks.extend(found)
            out.append(w)
        except SpecError as e:
            errors.append(e)
    if errors:
        first = errors[0]
        if len(errors) > 1:
            rest = ", ".join(e.field.split(".")[0] for e in errors[1:6])
            more = f" and {len(errors) - 6} more" if len(errors) > 6 else ""
            raise SpecError(first.path, first.field,
                            f"{first.message} (also bad: {rest}{more})")
        raise first
    if not out:
        raise SpecError(path, "", "no workloads")
    return out


def load_problem(path: str | Path, *, strict: bool = False) -> Problem:
    """Load a problem directory (definition.json + workload.jsonl) or a KernelBench .py.

    Upstream SOL-ExecBench quirks (:data:`QUIRKS`) are accepted with a one-line warning each
    (kept in ``Problem.notes``); ``strict=True`` rejects them.

    Raises:
        SpecError: naming the file and field at fault (never a bare traceback).
    """
    path = Path(path)
    if path.is_file() and path.suffix == ".py":
        from .kernelbench import load_kernelbench_problem

        return load_kernelbench_problem(path)
    if path.is_file() and path.name == "definition.json":
        path = path.parent
    if not path.exists():
        raise SpecError(path, "", "no such problem (expected a problem directory, a KernelBench .py, or a bundled suite problem such as l1/relu_fp32)")
    if not path.is_dir():
        raise SpecError(path, "", "not a problem directory or KernelBench .py file")
    defn = load_definition(path / "definition.json")
    check_reference(defn, path / "definition.json")
    quirks: list[str] = []
    workloads = load_workloads(path / "workload.jsonl", defn, strict=strict, quirks=quirks)
    return Problem(definition=defn, workloads=workloads, path=path, notes=quirks)


def load_solution(path: str | Path, problem: Problem | None = None) -> Solution:
    """Load a solution.json, or wrap a candidate .py (KernelBench ``ModelNew`` or a plain
    ``run``) as a Solution.

    Empty ``content`` fields are filled from files beside the solution.json.
    Raises SpecError naming the file and field.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(path, "", "no such solution file (expected a solution.json or a candidate .py)")
    if path.suffix == ".py":
        from .kernelbench import solution_from_py

        return solution_from_py(path, problem)
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise SpecError(path, "", "expected a JSON object")
    for i, src in enumerate(raw.get("sources") or []):
        if isinstance(src, dict) and not src.get("content") and isinstance(src.get("path"), str):
            f = path.parent / src["path"]
            if f.is_file() and f.resolve().is_relative_to(path.parent.resolve()):
                src["content"] = f.read_text()
    try:
        sol = Solution.model_validate(raw)
    except ValidationError as e:
        raise spec_error_from_validation(path, e) from None
    for i, s in enumerate(sol.sources):
        if not s.content.strip() and s.path == sol.spec.entry_file:
            raise SpecError(path, f"sources[{i}].content", f"entry file {s.path!r} is empty")
    if problem is not None and sol.definition != problem.name:
        raise SpecError(
            path, "definition",
            f"solution is for {sol.definition!r}, not for problem {problem.name!r}",
        )
    return sol


def reference_solution(problem: Problem) -> Solution:
    """The reference itself packaged as a (non-DPS) pytorch solution."""
    if problem.kind == "kernelbench":
        src = Path(problem.path).read_text()
        return Solution(
            name=f"{problem.name}__reference", definition=problem.name, author="reference",
            spec={"languages": ["pytorch"], "entry_point": "reference.py::Model",
                  "destination_passing_style": False},
            sources=[{"path": "reference.py", "content": src}],
        )
    return Solution(
        name=f"{problem.name}__reference", definition=problem.name, author="reference",
        description="the problem's reference, evaluated as a candidate",
        spec={"languages": ["pytorch"], "entry_point": "reference.py::run",
              "destination_passing_style": False},
        sources=[{"path": "reference.py", "content": problem.definition.reference}],
    )
