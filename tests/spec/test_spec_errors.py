"""Bad problem and solution files give one clear line naming the file and the field, and
``solbench validate`` exits non-zero; the loaders raise SpecError with the same facts."""

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.cli import app
from solbench.errors import ConstraintError, SpecError
from solbench.spec import load_problem, load_solution

ADD_DEF = {
    "name": "vec_add",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y):\n    return x + y\n",
}


def wl(uuid="w0", n=8, **extra):
    return {"uuid": uuid, "axes": {"n": n},
            "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}, **extra}


def write_problem(root: Path, definition=None, workloads=None, raw_workloads=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "definition.json").write_text(json.dumps(definition if definition is not None else ADD_DEF))
    if raw_workloads is None:
        raw_workloads = "\n".join(json.dumps(w) for w in (workloads or [wl()])) + "\n"
    (root / "workload.jsonl").write_text(raw_workloads)
    return root


def sol_dict(**spec_over):
    spec = {"languages": ["pytorch"], "entry_point": "main.py::run", "destination_passing_style": False}
    spec.update(spec_over)
    return {"name": "cand", "definition": "vec_add", "author": "t", "spec": spec,
            "sources": [{"path": "main.py", "content": "def run(x, y):\n    return x + y\n"}]}


def defn(**changes):
    d = copy.deepcopy(ADD_DEF)
    for k, v in changes.items():
        d[k] = v
    return d


def bad_dtype():
    d = defn()
    d["inputs"]["x"]["dtype"] = "float17"
    return d


def bad_axis():
    d = defn()
    d["inputs"]["y"]["shape"] = ["m"]
    return d


def unsafe_expr():
    d = defn()
    d["axes"]["k"] = {"type": "expr", "expression": "__import__('os').getpid()"}
    return d


def attr_expr():
    d = defn()
    d["axes"]["k"] = {"type": "expr", "expression": "n.__class__"}
    return d


def constrained():
    return defn(constraints=["n % 2 == 0"])


#: id -> (writer(tmp) -> path to validate, file name at fault, field text, message text)
PROBLEM_CASES = {
    "unknown_key": (lambda t: write_problem(t, defn(flavour="x")), "definition.json", "flavour",
                    "unknown key"),
    "bad_dtype": (lambda t: write_problem(t, bad_dtype()), "definition.json", "inputs.x.dtype",
                  "unknown dtype 'float17'"),
    "unknown_axis_in_shape": (lambda t: write_problem(t, bad_axis()), "definition.json",
                              "inputs.y.shape", "unknown axis 'm'"),
    "unsafe_expr": (lambda t: write_problem(t, unsafe_expr()), "definition.json",
                    "axes.k.expression", "Call is not allowed"),
    "attribute_expr": (lambda t: write_problem(t, attr_expr()), "definition.json",
                       "axes.k.expression", "Attribute is not allowed"),
    "constraint_violated": (lambda t: write_problem(t, constrained(), [wl("a", 4), wl("b", 3)]),
                            "workload.jsonl", "line 2", "'n % 2 == 0' is false"),
    "duplicate_uuid": (lambda t: write_problem(t, workloads=[wl("a"), wl("b"), wl("a")]),
                       "workload.jsonl", "line 3.uuid", "duplicate uuid a"),
    "bad_json_line": (lambda t: write_problem(t, raw_workloads=json.dumps(wl("a")) + "\n{\"uuid\": \n"),
                      "workload.jsonl", "line 2", "invalid JSON"),
    "mixed_custom_inputs": (lambda t: write_problem(t, workloads=[wl("a"), {
        "uuid": "b", "axes": {"n": 4}, "inputs": {"x": {"type": "custom"}, "y": {"type": "random"}}}]),
        "workload.jsonl", "line 2", "inputs: a workload is either all-custom"),
    "unknown_workload_key": (lambda t: write_problem(t, workloads=[wl("a", weight=3)]),
                             "workload.jsonl", "line 1.weight", "unknown key"),
    "missing_input_source": (lambda t: write_problem(t, workloads=[{"uuid": "a", "axes": {"n": 4},
                                                                     "inputs": {"x": {"type": "random"}}}]),
                             "workload.jsonl", "line 1.inputs", "no source for inputs ['y']"),
    "tolerance_out_of_range": (lambda t: write_problem(t, workloads=[wl("a", tolerance={"required_match_ratio": 1.5})]),
                               "workload.jsonl", "line 1.tolerance", "within [0, 1]"),
}


def _write_solution(t: Path, d: dict, extra_files: dict | None = None) -> Path:
    t.mkdir(parents=True, exist_ok=True)
    for k, v in (extra_files or {}).items():
        (t / k).write_text(v)
    p = t / "solution.json"
    p.write_text(json.dumps(d))
    return p


def _dotdot():
    d = sol_dict(entry_point="../evil.py::run")
    d["sources"] = [{"path": "../evil.py", "content": "def run(x, y):\n    return x\n"}]
    return d


def _entry_missing():
    return sol_dict(entry_point="kernel.py::run")


def _mixed_langs():
    return sol_dict(languages=["pytorch", "cuda_cpp"])


SOLUTION_CASES = {
    "dotdot_path": (lambda t: _write_solution(t, _dotdot()), "sources[0].path", "stay inside the solution"),
    "entry_file_missing": (lambda t: _write_solution(t, _entry_missing()), "spec.entry_point",
                           "'kernel.py' is not among sources"),
    "mixed_languages": (lambda t: _write_solution(t, _mixed_langs()), "spec.languages",
                        "cannot be mixed"),
    "unknown_language": (lambda t: _write_solution(t, sol_dict(languages=["fortran"])), "spec.languages",
                         "unknown languages ['fortran']"),
    "entry_without_symbol": (lambda t: _write_solution(t, sol_dict(entry_point="main.py")),
                             "spec.entry_point", "file.py::function"),
    "empty_entry_file": (lambda t: _write_solution(t, {**sol_dict(), "sources": [{"path": "main.py", "content": ""}]}),
                         "sources[0].content", "is empty"),
}


def _invalid_lines(result) -> list[str]:
    return [x for x in result.stderr.splitlines() if x.strip()]


@pytest.mark.parametrize("case", list(PROBLEM_CASES))
def test_bad_problem_one_line_naming_file_and_field(case, tmp_path):
    write, fname, field, msg = PROBLEM_CASES[case]
    pdir = write(tmp_path / "prob")
    r = CliRunner().invoke(app, ["validate", str(pdir)])
    assert r.exit_code == 1, r.output
    lines = _invalid_lines(r)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("INVALID ")
    assert str(pdir / fname) in line, line
    assert field in line and msg in line, line
    assert "Traceback" not in r.output
    assert "0 valid, 1 invalid" in r.stdout
    # the loader raises the same, as a SpecError with the file and field as attributes
    with pytest.raises(SpecError) as ei:
        load_problem(pdir)
    assert ei.value.path == str(pdir / fname)
    assert field in f"{ei.value.field}: {ei.value.message}"


def test_constraint_violation_is_a_constraint_error(tmp_path):
    pdir = write_problem(tmp_path / "p", constrained(), [wl("a", 4), wl("b", 3)])
    with pytest.raises(ConstraintError) as ei:
        load_problem(pdir)
    assert ei.value.field == "line 2" and "workload b" in ei.value.message
    # the satisfied workload alone loads
    write_problem(tmp_path / "q", constrained(), [wl("a", 4)])
    assert [w.uuid for w in load_problem(tmp_path / "q").workloads] == ["a"]


@pytest.mark.parametrize("case", list(SOLUTION_CASES))
def test_bad_solution_one_line_naming_file_and_field(case, tmp_path):
    write, field, msg = SOLUTION_CASES[case]
    path = write(tmp_path / "sol")
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 1, r.output
    lines = _invalid_lines(r)
    assert len(lines) == 1, lines
    assert str(path) in lines[0] and field in lines[0] and msg in lines[0], lines[0]
    assert "Traceback" not in r.output
    with pytest.raises(SpecError) as ei:
        load_solution(path)
    assert ei.value.path == str(path)
    assert field in f"{ei.value.field}: {ei.value.message}"


def test_validate_reports_each_bad_problem_and_keeps_good_ones(tmp_path):
    good = write_problem(tmp_path / "good")
    bad1 = write_problem(tmp_path / "bad1", bad_dtype())
    bad2 = write_problem(tmp_path / "bad2", workloads=[wl("a"), wl("a")])
    r = CliRunner().invoke(app, ["validate", str(good), str(bad1), str(bad2)])
    assert r.exit_code == 1
    lines = _invalid_lines(r)
    assert len(lines) == 2
    assert str(bad1 / "definition.json") in lines[0] and str(bad2 / "workload.jsonl") in lines[1]
    assert "OK vec_add: 1 workloads" in r.stdout and "1 valid, 2 invalid" in r.stdout


def test_good_solution_and_sources_read_from_files(tmp_path):
    d = sol_dict()
    d["sources"] = [{"path": "main.py", "content": ""}]  # content filled from the file beside it
    path = _write_solution(tmp_path, d, {"main.py": "def run(x, y):\n    return y + x\n"})
    sol = load_solution(path)
    assert sol.source("main.py") == "def run(x, y):\n    return y + x\n"
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 0 and "OK solution cand for vec_add (pytorch)" in r.stdout


def test_missing_path_and_missing_workloads_file(tmp_path):
    r = CliRunner().invoke(app, ["validate", str(tmp_path / "nope")])
    assert r.exit_code == 1 and f"{tmp_path / 'nope'}: no such file or directory" in r.stderr
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "definition.json").write_text(json.dumps(ADD_DEF))
    with pytest.raises(SpecError) as ei:
        load_problem(tmp_path / "p")
    assert ei.value.path == str(tmp_path / "p" / "workload.jsonl") and "file not found" in str(ei.value)


def test_kernelbench_file_without_get_inputs(tmp_path):
    p = tmp_path / "kb.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                 "def get_init_inputs():\n    return []\n")
    r = CliRunner().invoke(app, ["validate", str(p)])
    assert r.exit_code == 1
    line = _invalid_lines(r)[0]
    assert str(p) in line and "get_inputs" in line and "must define it" in line


def test_validate_candidate_py_files(tmp_path):
    run_cand = tmp_path / "cand_run.py"
    run_cand.write_text("import torch\n\ndef run(x, y):\n    return torch.add(x, y)\n")
    kb_cand = tmp_path / "cand_kb.py"
    kb_cand.write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                       "        return x\n")
    r = CliRunner().invoke(app, ["validate", str(run_cand), str(kb_cand)])
    assert r.exit_code == 0, r.output
    assert "OK solution cand_run for cand_run (pytorch; KernelBench candidate, entry run)" in r.stdout
    assert "OK solution cand_kb for cand_kb (pytorch; KernelBench candidate, entry ModelNew)" in r.stdout
    bad = tmp_path / "cand_bad.py"
    bad.write_text("class ModelNew(:\n    pass\n")
    r = CliRunner().invoke(app, ["validate", str(bad)])
    assert r.exit_code == 1 and f"{bad}: line 1: syntax error" in r.stderr


def test_validate_dir_reports_a_problem_dir_without_definition(tmp_path):
    """Red team 2026-11-30: a problem dir that lost definition.json was silently skipped when
    its parent folder was validated (6 invalid reported, not 7)."""
    write_problem(tmp_path / "all" / "good")
    broken = write_problem(tmp_path / "all" / "broken")
    (broken / "definition.json").unlink()
    r = CliRunner().invoke(app, ["validate", str(tmp_path / "all")])
    assert r.exit_code == 1
    lines = _invalid_lines(r)
    assert len(lines) == 1 and str(broken / "definition.json") in lines[0] and "missing" in lines[0]
    assert "1 valid, 1 invalid" in r.stdout


def test_all_bad_workload_lines_are_named_at_once(tmp_path):
    """Red team 2026-11-30: six bad workload lines took six validate runs to find."""
    d = write_problem(tmp_path / "p", workloads=[wl("a"), wl("b"), wl("c")])
    lines = (d / "workload.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"uuid"', '"uuidd"')  # unknown key / missing uuid
    lines[2] = "{not json"
    (d / "workload.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as ei:
        load_problem(d)
    e = ei.value
    assert e.field.startswith("line 1") and "also bad: line 3" in e.message
    r = CliRunner().invoke(app, ["validate", str(d)])
    assert r.exit_code == 1 and len(_invalid_lines(r)) == 1  # still one line per problem


def test_a_candidate_py_without_an_entry_point_names_what_it_defines(tmp_path):
    """A candidate .py with neither ``ModelNew`` nor ``run``: one line naming the file, the
    field (entry point) and the top-level classes and functions it does define (before:
    "ModelNew: candidate file must define class ModelNew or def run", a field named after a
    class the file does not have)."""
    p = load_problem(write_problem(tmp_path / "p"))
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n\nclass Helper:\n    pass\n\ndef forward(x, y):\n    return x + y\n")
    with pytest.raises(SpecError) as e:
        load_solution(cand, p)
    msg = str(e.value)
    assert "cand.py" in msg and "entry point" in msg and "Helper, forward" in msg, msg
    assert "\n" not in msg
