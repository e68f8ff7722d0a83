"""``solbench validate``: check definitions, workloads and solutions without running them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import typer

from ..spec.kernelbench import missing_entry
from .common import clean_message, console, err_console, escape_markup


def _kind(path: Path) -> str:
    """"problem", "solution", "kernelbench_problem", "kernelbench_candidate" or "dir"."""
    if path.is_dir():
        return "problem" if (path / "definition.json").exists() else "dir"
    if path.suffix == ".py":
        text = path.read_text(errors="replace")
        # a candidate defines ModelNew, or a plain run() without a Model (see solution_from_py)
        is_cand = "class ModelNew" in text or ("def run" in text and "class Model" not in text)
        return "kernelbench_candidate" if is_cand else "kernelbench_problem"
    if path.name == "definition.json" or path.name == "workload.jsonl":
        return "problem"
    if path.suffix == ".json":
        return "solution"
    return "unknown"


# --- KernelBench files, statically (never imported, never run) ---------------------------
_ELEM_BYTES = {"float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2,
               "bfloat16": 2, "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2,
               "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "randn_like", "tensor"}


class _Unknown(Exception):
    pass


def _const(node: ast.AST, env: dict):
    """Value of a constant expression over numbers and names bound in ``env`` (+ - * / // %
    **, tuples, lists). Raises _Unknown for anything else: nothing is ever executed."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_const(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _const(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _const(node.left, env), _const(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Div: lambda: a / b, ast.Mod: lambda: a % b,
               ast.Pow: lambda: a ** b if abs(b) < 64 else None}
        f = ops.get(type(node.op))
        if f is None or not all(isinstance(x, (int, float)) for x in (a, b)):
            raise _Unknown("op")
        v = f()
        if v is None:
            raise _Unknown("pow")
        return v
    raise _Unknown(type(node).__name__)


def _assignments(body: list[ast.stmt], env: dict, exprs: dict) -> None:
    for st in body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            if st.value is None:
                continue
            for t in targets:
                if isinstance(t, ast.Name):
                    exprs[t.id] = st.value
                    try:
                        env[t.id] = _const(st.value, env)
                    except _Unknown:
                        env.pop(t.id, None)


def _tensor_of(node: ast.AST, env: dict, exprs: dict, depth: int = 0) -> tuple[str, tuple | None, str]:
    """(kind, shape or None, dtype name) of one get_inputs() element, statically."""
    if isinstance(node, ast.Name) and node.id in exprs and depth < 5:
        return _tensor_of(exprs[node.id], env, exprs, depth + 1)
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if isinstance(fn, ast.Attribute) and name in ("to", "cuda", "contiguous", "float", "half",
                                                     "bfloat16", "double") and depth < 5:
            kind, shape, dt = _tensor_of(fn.value, env, exprs, depth + 1)
            return kind, shape, {"float": "float32", "half": "float16", "bfloat16": "bfloat16",
                                 "double": "float64"}.get(name, dt)
        if name in _MAKERS:
            dtype = "int64" if name == "randint" else "float32"
            for kw in node.keywords:
                if kw.arg == "dtype":
                    dtype = kw.value.attr if isinstance(kw.value, ast.Attribute) else "?"
            args = node.args
            if name == "randint":
                size = [kw.value for kw in node.keywords if kw.arg == "size"] or args[2:3] or args[1:2]
                args = size
            elif name == "full":
                args = args[:1]
            try:
                dims = [_const(a, env) for a in args]
                shape = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], tuple) else tuple(dims)
                if not all(isinstance(d, int) for d in shape):
                    shape = None
            except _Unknown:
                shape = None
            return "tensor", shape, dtype
    try:
        v = _const(node, env)
        return type(v).__name__, (), ""
    except _Unknown:
        return "?", None, ""


def kernelbench_static(path: Path, text: str, candidate: bool) -> str:
    """One line describing a KernelBench problem or candidate file, from its syntax tree only
    (user code is never imported or run: ``get_inputs()`` may allocate gigabytes). Raises
    ValueError with "field: message" when a required symbol is missing."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise ValueError(f"line {e.lineno}: syntax error: {e.msg}") from None
    top = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if candidate:
        if "ModelNew" in top:
            entry = "ModelNew"
        elif "run" in top:
            entry = "run"
        else:
            raise ValueError(f"entry point: {missing_entry(top)}")
        lang = "triton" if "triton" in text else "pytorch"
        return f"OK solution {path.stem} for {path.stem} ({lang}; KernelBench candidate, entry {entry})"
    for need in ("Model", "get_inputs", "get_init_inputs"):
        if need not in top:
            raise ValueError(f"{need}: KernelBench problem file must define it")
    model = top["Model"]
    if not isinstance(model, ast.ClassDef) or not any(
            isinstance(b, ast.FunctionDef) and b.name == "forward" for b in model.body):
        raise ValueError("Model.forward: Model must be a class with a forward method")
    env: dict = {}
    exprs: dict = {}
    _assignments(tree.body, env, exprs)
    gi = top["get_inputs"]
    fenv, fexprs = dict(env), dict(exprs)
    _assignments(gi.body, fenv, fexprs)
    rets = [st.value for st in ast.walk(gi) if isinstance(st, ast.Return) and st.value is not None]
    desc = "inputs not statically known"
    if len(rets) == 1 and isinstance(rets[0], (ast.List, ast.Tuple)):
        parts, total, known = [], 0, True
        for i, el in enumerate(rets[0].elts):
            kind, shape, dt = _tensor_of(el, fenv, fexprs)
            if kind == "tensor":
                if shape is None:
                    known = False
                    parts.append(f"arg{i}: tensor (shape not static)")
                else:
                    n = 1
                    for d in shape:
                        n *= d
                    eb = _ELEM_BYTES.get(dt)
                    known = known and eb is not None
                    total += n * (eb or 0)
                    parts.append(f"arg{i}: {'x'.join(map(str, shape)) or 'scalar'} {dt}")
            else:
                parts.append(f"arg{i}: {kind}")
        desc = f"{len(parts)} input(s) ({', '.join(parts)})"
        if known and total:
            desc += f", {total / 1e9:.3g} GB of inputs" if total >= 1e8 else f", {total:,} bytes of inputs"
    return f"OK {path.stem}: KernelBench problem, {desc}; checked statically (get_inputs() not run)"


#: JSON files a folder of problems holds that are no solution: the problem's own, and the report
#: ``solbench extract -o DIR`` writes beside the problems it extracted (extract/pipeline.py)
_NOT_SOLUTIONS = ("definition.json", "metadata.json", "config.json", "extract_report.json")


def validate_path(path: Path, strict: bool = False) -> list[tuple[bool, str]]:
    """(ok, line) for ``path``: a problem dir, definition/workload file, solution.json,
    KernelBench file, or a directory searched for problem dirs and solution files.
    ``strict``: upstream quirks the loader otherwise accepts with a warning are invalid."""
    if not path.exists():
        from ..suites import resolve_problem

        bundled = Path(resolve_problem(path))  # l1/relu_fp32, as every other command takes it
        if not bundled.exists():
            return [(False, f"{path}: no such file or directory (nor a bundled suite problem "
                            "such as l1/relu_fp32)")]
        path = bundled
    kind = _kind(path)
    if kind in ("kernelbench_problem", "kernelbench_candidate"):
        try:
            text = path.read_text()
            return [(True, kernelbench_static(path, text, kind == "kernelbench_candidate"))]
        except (OSError, UnicodeDecodeError) as e:
            return [(False, f"{path}: {type(e).__name__}: {e}")]
        except ValueError as e:
            return [(False, f"{path}: {e}")]
    from ..errors import SolbenchError
    from ..spec import load_problem, load_solution

    if kind == "dir":
        out: list[tuple[bool, str]] = []
        found = sorted(p.parent for p in path.rglob("definition.json"))
        sols = sorted(p for p in path.rglob("*.json") if p.name not in _NOT_SOLUTIONS
                      and not (p.parent / "definition.json").exists() or p.name == "solution.json")
        for d in found:
            out += validate_path(d, strict)
        # a problem dir that lost its definition.json is a broken problem, not nothing
        for wl in sorted(path.rglob("workload.jsonl")):
            if not (wl.parent / "definition.json").exists():
                out.append((False, f"{wl.parent / 'definition.json'}: missing (the directory "
                                   "has a workload.jsonl, so it is meant to be a problem)"))
        for s in sols:
            out += validate_path(s, strict)
        if not found and not sols:
            out.append((False, f"{path}: no problem directories or solutions found"))
        return out
    try:
        if kind == "problem":
            prob = load_problem(path.parent if path.name in ("definition.json", "workload.jsonl") else path,
                                strict=strict)
            from ..spec.problem import reference_signature_issue

            issue = reference_signature_issue(prob.definition)
            if issue:
                return [(False, f"{prob.path / 'definition.json'}: reference: {issue}")]
            missing = prob.missing_blobs()
            line = f"OK {prob.name}: {len(prob.workloads)} workloads"
            if prob.notes:
                line += (f" (warning: {len(prob.notes)} upstream quirk(s) accepted, e.g. {prob.notes[0]}; "
                         "--strict rejects them)")
            if missing:
                line += (f" (warning: {len(missing)} safetensors input(s) have no blob on disk, e.g. "
                         f"{missing[0][2]}; those workloads cannot run)")
            return [(True, line)]
        if kind == "solution":
            sol = load_solution(path)
            return [(True, f"OK solution {sol.name} for {sol.definition} ({', '.join(sol.spec.languages)})")]
        return [(False, f"{path}: not a problem, solution or KernelBench file")]
    except SolbenchError as e:
        return [(False, clean_message(str(e)))]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [(False, f"{path}: {type(e).__name__}: {e}")]


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(paths: list[Path] = typer.Argument(..., help="problem dirs, solution.json, KernelBench .py, or folders"),
                 quiet: bool = typer.Option(False, "--quiet", "-q", help="print only problems"),
                 strict: bool = typer.Option(False, "--strict", help="reject upstream SOL-ExecBench quirks "
                                             "(an input given as a workload axis, workload inputs the "
                                             "definition lacks) that are otherwise accepted with a warning")) -> None:
        """Check formats without running anything. Exit 0 when everything is valid; otherwise one
        line per problem naming the file, the field and what is wrong."""
        results: list[tuple[bool, str]] = []
        for p in paths:
            results += validate_path(p, strict)
        bad = [line for ok, line in results if not ok]
        if not quiet:
            for ok, line in results:
                if ok:
                    console.print(line, highlight=False, soft_wrap=True, markup=False)
        for line in bad:
            err_console.print(f"[red]INVALID[/red] {escape_markup(line)}", highlight=False, soft_wrap=True)
        console.print(f"{len(results) - len(bad)} valid, {len(bad)} invalid", highlight=False)
        raise typer.Exit(1 if bad else 0)
