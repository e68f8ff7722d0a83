"""Baseline candidates: torch.compile wrapper (solbench baseline --compile) and the packed
hand-written Triton candidates."""

import ast
import json
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from solbench.spec import load_problem, load_solution
from solbench.spec.reference import import_source
from solbench.suites import pack_triton
from solbench.suites.baseline import compile_baseline, write_solution

from .conftest import DLRM_DIR, cpu_inputs, run_reference

SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"
L1_DIR = DLRM_DIR.parent / "l1"


def _run_solution(sol, problem, inputs):
    mod = import_source(sol.source(sol.spec.entry_file), stem=sol.name)
    fn = getattr(mod, sol.spec.entry_symbol)
    out = fn(*[inputs[k] for k in problem.definition.inputs])
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("name", ["dlrm06_dot_interaction_forward_fp32",
                                  "dlrm04_sparse_grad_coalesce"])
def test_compile_baseline_structure_and_eager_run(tmp_path, name):
    problem = load_problem(DLRM_DIR / name)
    sol = compile_baseline(problem, backend="eager")
    assert sol.definition == name and sol.spec.languages == ["pytorch"]
    assert sol.spec.destination_passing_style is False
    assert sol.spec.entry_point == "baseline_compile.py::compiled_run"
    src = sol.source("baseline_compile.py")
    assert src.startswith(problem.definition.reference)
    assert "torch.compile(run, backend='eager'" in src
    path = write_solution(sol, tmp_path / "out")
    loaded = load_solution(path, problem)
    assert loaded.content_hash() == sol.content_hash()
    w = next(w for w in problem.workloads if "cpu" in (w.tags or []))
    _, inputs = cpu_inputs(problem, w)
    got = _run_solution(loaded, problem, inputs)
    want = run_reference(problem, inputs)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_compile_baseline_default_is_inductor():
    problem = load_problem(DLRM_DIR / "dlrm09_small_k_linear_relu_fp32")
    sol = compile_baseline(problem)
    assert sol.name.endswith("__torch_compile")
    assert "backend='inductor'" in sol.source("baseline_compile.py")
    with pytest.raises(ValueError):
        compile_baseline(problem, backend="nope")


def test_compile_baseline_kernelbench(tmp_path):
    kb = tmp_path / "kb_problem.py"
    kb.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n"
        "        self.lin = torch.nn.Linear(n, n)\n\n"
        "    def forward(self, x):\n        return torch.relu(self.lin(x))\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
        "def get_init_inputs():\n    return [8]\n")
    problem = load_problem(kb)
    sol = compile_baseline(problem, backend="eager")
    assert sol.spec.entry_symbol == "ModelNew"
    mod = import_source(sol.source(sol.spec.entry_file), stem="kb_baseline")
    torch.manual_seed(0)
    ref = mod.Model(8)
    torch.manual_seed(0)
    new = mod.ModelNew(8)
    x = torch.randn(4, 8)
    torch.testing.assert_close(new(x), ref(x))


@pytest.mark.skipif(not SHARED.exists(), reason="../shared dataset absent")
def test_compile_baseline_for_a_sol_execbench_problem(tmp_path):
    pdir = SHARED / "FlashInfer-Bench" / "024_rmsnorm_h2048"
    problem = load_problem(pdir)
    path = write_solution(compile_baseline(problem, backend="eager"), tmp_path)
    sol = load_solution(path, problem)
    x = torch.randn(3, 2048).bfloat16()
    wgt = torch.randn(2048).bfloat16()
    mod = import_source(sol.source(sol.spec.entry_file), stem="sx_baseline")
    torch.testing.assert_close(mod.compiled_run(x, wgt), problem.make_reference("cpu")(x, wgt))


def test_cli_baseline_writes_solutions(tmp_path):
    from solbench.cli import baseline as cli_baseline

    app = typer.Typer()

    @app.callback()
    def _root():  # a group, as in the full CLI
        pass

    cli_baseline.register(app)
    runner = CliRunner()
    one = DLRM_DIR / "dlrm05_sparse_sgd_update"
    r = runner.invoke(app, ["baseline", str(one), "--compile", "-o", str(tmp_path / "a"),
                            "--backend", "eager"])
    assert r.exit_code == 0, r.output
    assert load_solution(tmp_path / "a" / one.name / "compile_eager.json").definition == one.name
    two = [str(DLRM_DIR / "dlrm05_sparse_sgd_update"), str(DLRM_DIR / "dlrm12_kjt_preprocess")]
    r = runner.invoke(app, ["baseline", *two, "--compile", "-o", str(tmp_path / "b"), "--json"])
    assert r.exit_code == 0, r.output
    paths = json.loads(r.stdout)["solutions"]
    assert [Path(p).parent.name for p in paths] == ["dlrm05_sparse_sgd_update",
                                                    "dlrm12_kjt_preprocess"]
    r = runner.invoke(app, ["baseline", str(tmp_path / "missing"), "--compile"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    r = runner.invoke(app, ["baseline", str(one)])
    assert r.exit_code == 2


def test_triton_candidates_are_packed_and_load():
    dlrm = {p for s, p, _, _ in pack_triton.CANDIDATES if s == "dlrm"}
    assert len({p for _, p, _, _ in pack_triton.CANDIDATES}) >= 10 and len(dlrm) >= 4
    assert "dlrm01_embedding_bag_sum_fp32" in dlrm
    for suite, name, src, dps in pack_triton.CANDIDATES:
        path = pack_triton.solution_path(suite, name)
        assert json.loads(path.read_text()) == pack_triton.solution_dict(suite, name, src, dps)
        pdir = DLRM_DIR.parent / suite / name
        if not pdir.exists():  # l1 suite not present in this checkout
            continue
        problem = load_problem(pdir)
        sol = load_solution(path, problem)
        assert sol.spec.languages == ["triton"]
        tree = ast.parse(sol.source(sol.spec.entry_file))
        run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
        n_in, n_out = len(problem.definition.inputs), len(problem.definition.outputs)
        npos = len(run.args.args)
        if run.args.vararg is None:
            assert npos == n_in + (n_out if dps else 0), name
        else:
            assert npos <= n_in, name


def test_triton_candidates_in_the_interpreter(tmp_path):
    """Runs bench/triton_check.py --device cpu (Triton's interpreter) when triton is
    installed; CI without triton skips."""
    pytest.importorskip("triton")
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "bench" / "triton_check.py"),
                        "--out", str(tmp_path), "--device", "cpu", "--only", "dlrm01,dlrm06"],
                       capture_output=True, text=True, timeout=300)
    rows = json.loads((tmp_path / "triton_check.json").read_text())["rows"]
    assert rows and all(r_["status"] == "PASSED" for r_ in rows), r.stdout[-3000:]
