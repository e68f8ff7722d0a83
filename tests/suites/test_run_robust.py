"""Issue 35, items 5 and 6: one invalid, unrunnable or big problem never stops a run.

- A problem whose reference needs CUDA (fp4 scaled matmul: SOL-ExecBench's nvfp4 Quant
  problems) is said so up front, recorded NOT_RUNNABLE without making an input, and
  skippable with ``--exclude-tag needs-cuda``; an op without a CPU kernel that the static
  rules miss becomes the same status when the reference raises.
- A problem that does not load is recorded with its reason and the run goes on.
- A workload whose estimated memory exceeds what is available is NOT_RUNNABLE with the
  figures (estimate worked out by hand below), and the next problem still gets its trace.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench import harness
from solbench.cli import app
from solbench.harness import memory_plan
from solbench.spec import Status, load_definition, load_problem, reference_solution
from solbench.spec.capability import NEEDS_CUDA, capability_tags, device_needs, runtime_need
from solbench.store import read_traces

DEV = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"
needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason="../shared/datasets/sol-execbench-dev not present")

ADD = {
    "name": "add2", "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}, "y": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x, y):\n    return x + y\n",
}


def _problem_dir(d: Path, defn: dict, sizes=(64,)) -> Path:
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps(defn))
    names = list(defn["inputs"])
    (d / "workload.jsonl").write_text("".join(
        json.dumps({"uuid": f"w{i}-{defn['name']}", "axes": {"n": n} if "n" in defn["axes"] else {},
                    "inputs": {k: {"type": "random"} for k in names}}) + "\n"
        for i, n in enumerate(sizes)))
    return d


def _with_reference_solution(d: Path) -> Path:
    sol = reference_solution(load_problem(d))
    (d / "solution.json").write_text(json.dumps(sol.model_dump(mode="json", exclude_none=True)))
    return d


# --- item 5: capability ---------------------------------------------------------------------
@needs_dev
def test_dev_nvfp4_problems_need_cuda_and_no_other_does():
    """By hand from the dev set's definitions: the four nvfp4 Quant problems call
    torch._scaled_mm on float4_e2m1fn_x2 (no CPU kernel); the fp8 ones (001, 005, 013, 017,
    021) dequantise or use per-tensor fp8, which the CPU runs; no L1/L2/FlashInfer problem
    needs CUDA by these rules."""
    flagged = set()
    for d in sorted(DEV.glob("*/*/definition.json")):
        defn = load_definition(d)
        if device_needs(defn):
            flagged.add(f"{d.parent.parent.name}/{d.parent.name[:3]}")
            assert capability_tags(defn) == [NEEDS_CUDA]
            assert device_needs(defn)[0].reason == ("needs CUDA: fp4 scaled matmul (torch._scaled_mm "
                                                    "on float4_e2m1fn_x2) has no CPU kernel")
    assert flagged == {"Quant/009", "Quant/025", "Quant/029", "Quant/033"}


def test_runtime_no_cpu_kernel_is_a_device_need():
    import torch

    try:
        getattr(torch, "_scaled_" + "grouped_mm")(torch.ones(4, 8), torch.ones(8, 4), torch.ones(4),
                                                   torch.ones(4), out_dtype=torch.bfloat16)
    except Exception as e:  # noqa: BLE001 - PyTorch's own error is the input here
        need = runtime_need(e, "cpu")
        assert need is not None and need.tag == NEEDS_CUDA
        assert need.reason.startswith("needs CUDA: torch._scaled_grouped_mm has no CPU kernel")
        assert runtime_need(e, "cuda:0") is None
    else:  # pragma: no cover - a future CPU kernel: nothing to convert
        pytest.skip("this torch has a CPU kernel for _scaled_grouped_mm")
    assert runtime_need(ValueError("shapes do not match"), "cpu") is None


HIDDEN_GROUPED = dict(ADD, name="hidden_grouped", reference=(
    "import torch\n\n"
    "def run(x, y):\n"
    "    # the op's name is built at run time: no static rule sees it\n"
    "    f = getattr(torch, '_scaled_' + 'grouped_mm')\n"
    "    return f(x.view(8, 8), y.view(8, 8), torch.ones(8), torch.ones(8), out_dtype=torch.float32).flatten()\n"))


def test_reference_without_cpu_kernel_is_not_runnable_not_invalid(tmp_path):
    """Before: INVALID_REFERENCE "reference failed: NotImplementedError: Could not run ...".
    Now NOT_RUNNABLE naming the op; the problem's second workload is recorded the same way
    without being run (no input set made: no seeds)."""
    d = _problem_dir(tmp_path / "hidden_grouped", HIDDEN_GROUPED, sizes=(64, 64))
    prob = load_problem(d)
    assert device_needs(prob.definition) == []  # the static rules miss it
    traces = harness.evaluate(prob, reference_solution(prob), harness.EvalConfig(device="cpu", timing=False))
    assert [t.evaluation.status for t in traces] == [Status.NOT_RUNNABLE] * 2
    for t in traces:
        line = t.evaluation.log.strip().splitlines()[0]
        assert line.startswith("not runnable on cpu: needs CUDA: torch._scaled_grouped_mm has no CPU kernel")
        assert any(f.check == "not_runnable" and f.evidence["need"] == NEEDS_CUDA for f in t.evaluation.findings)
    assert traces[1].evaluation.input_seeds is None


def _nvfp4_copy(dst: Path) -> Path:
    src = DEV / "Quant" / "009_nvfp4_vision_temporal_patch_merge_with_projection"
    dst.mkdir(parents=True)
    for f in ("definition.json", "workload.jsonl"):
        shutil.copy(src / f, dst / f)
    return _with_reference_solution(dst)


@needs_dev
def test_run_dataset_goes_on_past_invalid_and_cpu_less_problems(tmp_path):
    """A dataset of three problems: Quant/009 (nvfp4: needs CUDA), a folder whose
    definition.json is not JSON, and add2. Before: the broken folder's SpecError ended the
    whole command (exit 2, no trace), and 009 ran its inputs and reference for about 49 s to
    end INVALID_REFERENCE. Now: the broken problem is named with its reason, 009's workload
    is NOT_RUNNABLE with the reason up front and no input made, add2 PASSED, exit 0."""
    root = tmp_path / "ds" / "Q"
    _nvfp4_copy(root / "009_nvfp4")
    bad = root / "050_broken"
    bad.mkdir(parents=True)
    (bad / "definition.json").write_text("{ not json")
    (bad / "workload.jsonl").write_text("")
    (bad / "solution.json").write_text("{}")
    _with_reference_solution(_problem_dir(root / "060_add2", ADD))
    out = tmp_path / "r.jsonl"
    base = ["run-dataset", str(tmp_path / "ds"), "--device", "cpu", "--workload-limit", "1",
            "--iters", "2", "--rounds", "1", "-o", str(out)]
    r = CliRunner().invoke(app, base + ["--json"])
    assert r.exit_code == 0, r.output
    assert "050_broken" in r.stderr and "invalid problem, left out" in r.stderr
    assert ("009_nvfp4_vision_temporal_patch_merge_with_projection: needs CUDA: fp4 scaled matmul"
            in r.stderr) and "--exclude-tag needs-cuda" in r.stderr
    summary = json.loads(r.stdout)
    assert [p["path"] for p in summary["invalid_problems"]] == [str(bad)]
    got = {t.definition: t for t in read_traces(out)}
    assert set(got) == {"009_nvfp4_vision_temporal_patch_merge_with_projection", "add2"}
    t9 = got["009_nvfp4_vision_temporal_patch_merge_with_projection"].evaluation
    assert t9.status == Status.NOT_RUNNABLE and t9.input_seeds is None and t9.phases_s is None
    assert t9.log.startswith("not runnable on cpu: needs CUDA: fp4 scaled matmul")
    assert got["add2"].evaluation.status == Status.PASSED

    # --exclude-tag needs-cuda: 009 is not evaluated at all
    out2 = tmp_path / "r2.jsonl"
    r = CliRunner().invoke(app, base[:-1] + [str(out2), "--exclude-tag", NEEDS_CUDA, "--json"])
    assert r.exit_code == 0, r.output
    assert {t.definition for t in read_traces(out2)} == {"add2"}


def test_run_records_a_problem_that_does_not_load_and_goes_on(tmp_path):
    """`solbench run DIR`: a problem folder with a broken workload file among good ones."""
    probs = tmp_path / "probs"
    _problem_dir(probs / "add2", ADD)
    bad = _problem_dir(probs / "add3", dict(ADD, name="add3"))
    (bad / "workload.jsonl").write_text('{"uuid": "w0", "axes": {"n": "many"}}\n')
    sols = tmp_path / "sols"
    r = CliRunner().invoke(app, ["baseline", str(probs / "add2"), "--eager", "-o", str(sols)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(app, ["run", str(probs), "--solutions", str(sols), "--device", "cpu",
                                 "--iters", "2", "--rounds", "1", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert f"invalid problem, left out: {bad}" in r.stderr
    assert [p["path"] for p in json.loads(r.stdout)["invalid_problems"]] == [str(bad)]
    assert [t.evaluation.status for t in read_traces(out)] == [Status.PASSED]


# --- item 6: a big problem never kills the run -------------------------------------------------
CONV3D = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """3D convolution, KernelBench level-1 style: a small input, a 2 GiB fp32 output."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, kernel_size, padding=1, bias=False)

    def forward(self, x):
        return self.conv3d(x)


batch_size, in_channels, out_channels, kernel_size = 2, 1, 256, 3
depth, height, width = 16, 256, 256


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''

RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
'''

CAND = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        {body}
'''

# By hand, the conv3d above: input I = 2*1*16*256*256 fp32 = 8,388,608 bytes; output
# O = 2*256*16*256*256 fp32 = 536,870,912 elements = 2,147,483,648 bytes; I + O above the
# CPU slot budget (1 GiB): one slot. ModelNew returns its output (not destination-passing).
I_B, O_B = 8_388_608, 2_147_483_648
WB = memory_plan.WORKER_BASE  # 402,653,184
HAND = {
    "slots": I_B + O_B,                      # 2,155,872,256
    "reference_slots": I_B + O_B,            # the reference's twin pool
    "input_set": I_B, "reference_copies": I_B,
    "reference_outputs": O_B, "first_outputs": O_B,
    "truth": 8 * (I_B // 4) + 8 * (O_B // 4),  # float64 of every fp32 element: 4,311,744,512
    "compare": (1 << 25) * 32,               # one chunk of the comparisons: 1,073,741,824
    "candidate_worker": WB + O_B, "reference_worker": WB + O_B,
}
HAND_TOTAL = 19_109_249_024        # sum(HAND.values()), with the flush buffers on top
HAND_LEAN = 14_403_239_936         # without reference_slots and reference_worker


def test_estimate_of_the_conv3d_by_hand(tmp_path):
    assert sum(HAND.values()) == HAND_TOTAL
    kb = tmp_path / "59_conv3d.py"
    kb.write_text(CONV3D)
    prob = load_problem(kb)  # output shape from the meta device: nothing of 2 GiB is made
    cfg = harness.EvalConfig(device="cpu")
    terms, k = memory_plan.estimate(prob, prob.workloads[0], cfg, flush_bytes=0)
    assert k == 1
    assert {n: v for n, v in terms.items() if n != "flush"} == HAND
    lean, _ = memory_plan.estimate(prob, prob.workloads[0], cfg, flush_bytes=0, reference_timing=False)
    assert sum(lean.values()) == HAND_LEAN


def test_run_kernelbench_records_a_workload_too_big_and_goes_on(tmp_path, monkeypatch):
    """Before: the conv3d's evaluation allocated its 2 GiB output several times over (on a
    24 GB host the OOM killer ended solbench: no trace for it or any later problem). Now,
    with 4 GiB available, it is NOT_RUNNABLE with the estimate (by hand above) against the
    available bytes, before any worker or input; the relu after it still PASSED."""
    monkeypatch.setenv(memory_plan.ENV, "4G")
    probs, cands = tmp_path / "level1", tmp_path / "mine"
    probs.mkdir()
    cands.mkdir()
    (probs / "59_conv3d.py").write_text(CONV3D)
    (probs / "60_relu.py").write_text(RELU)
    (cands / "59_conv3d.py").write_text(CAND.format(body=(
        "self.conv3d = nn.Conv3d(args[0], args[1], args[2], padding=1, bias=False)\n\n"
        "    def forward(self, x):\n        return self.conv3d(x)")))
    (cands / "60_relu.py").write_text(CAND.format(body="\n    def forward(self, x):\n        return torch.relu(x)"))
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(app, ["run-kernelbench", str(probs), str(cands), "--device", "cpu",
                                 "--iters", "2", "--rounds", "1", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    got = {t.definition: t.evaluation for t in read_traces(out)}
    assert got["60_relu"].status == Status.PASSED
    ev = got["59_conv3d"]
    assert ev.status == Status.NOT_RUNNABLE and ev.input_seeds is None
    (f,) = [f for f in ev.findings if f.check == "not_runnable"]
    e = f.evidence
    # the share less what the solbench process already holds (this test's process: < 4 GiB)
    assert 0 < e["available_bytes"] < 4 << 30
    assert e["available_source"].startswith("$SOLBENCH_MEMORY_AVAILABLE 4.29 GB less this process's ")
    flush = e["terms"]["flush"]
    assert {n: v for n, v in e["terms"].items() if n != "flush"} == {
        **HAND, "reference_slots": 0, "reference_worker": 0}
    assert e["estimated_bytes"] == HAND_LEAN + flush
    assert e["estimated_with_reference_timing_bytes"] == HAND_TOTAL + 2 * flush
    assert ev.log.startswith("not runnable on cpu: does not fit this machine's memory: estimated 14.")
    assert f"against {e['available_bytes'] / 1e9:.2f} GB available" in ev.log


def test_a_workload_that_fits_only_without_reference_timing_runs_so(tmp_path, monkeypatch):
    """Available bytes between the plan without the reference's timing and the full one:
    the workload runs, judged as always, its candidate timed, the reference not (no
    speedup), and the ``memory_plan`` finding says why with both figures."""
    d = _problem_dir(tmp_path / "add2", ADD, sizes=(1 << 20,))
    prob = load_problem(d)
    cfg = harness.EvalConfig(device="cpu", iters=2, rounds=1)
    from solbench.harness.evaluator import flush_bytes

    fb = flush_bytes(cfg)
    full = sum(memory_plan.estimate(prob, prob.workloads[0], cfg, flush_bytes=fb)[0].values())
    lean = sum(memory_plan.estimate(prob, prob.workloads[0], cfg, flush_bytes=fb,
                                    reference_timing=False)[0].values())
    # x, y, out: 4 MiB each, 12 MiB a slot, 8 slots in the CPU budget (1 GiB): the twin pool
    # 96 MiB, its flush buffer, the reference's worker (its base and its 4 MiB output)
    assert full - lean == 8 * (12 << 20) + fb + WB + (4 << 20)
    own = memory_plan._own_resident()  # counted against the share (it grows little meanwhile)
    monkeypatch.setenv(memory_plan.ENV, str(int((full + lean) / 2 / memory_plan.MARGIN) + own))
    (t,) = harness.evaluate(prob, reference_solution(prob), cfg)
    ev = t.evaluation
    assert ev.status == Status.PASSED and ev.timing is not None and ev.reference_timing is None
    assert ev.performance.speedup_factor is None
    (f,) = [f for f in ev.findings if f.check == "memory_plan"]
    assert f.evidence["estimated_bytes"] == lean and f.evidence["estimated_with_reference_timing_bytes"] == full


def test_every_status_has_a_table_style():
    """A status without a style printed "[]NOT_RUNNABLE[/]": rich's MarkupError ended
    `solbench eval` on the nvfp4 problems after their traces were written."""
    from solbench.report.tables import STATUS_STYLE

    assert set(STATUS_STYLE) == set(Status)


def test_plan_run_matches_capability_tags(tmp_path):
    """`solbench run --exclude-tag needs-cuda` / `--tag needs-cuda`: the problem's capability
    tag counts as a tag of each of its workloads (plan only, nothing evaluated)."""
    from solbench.run.plan import plan_run

    grouped = dict(ADD, name="grouped", reference=(
        "import torch\n\ndef run(x, y):\n"
        "    return torch._scaled_grouped_mm(x.view(8, 8), y.view(8, 8), torch.ones(8), torch.ones(8)).flatten()\n"))
    probs = tmp_path / "probs"
    paths = [_problem_dir(probs / "add2", ADD), _problem_dir(probs / "grouped", grouped)]
    assert capability_tags(load_problem(paths[1]).definition) == [NEEDS_CUDA]
    sols = tmp_path / "sols"
    for p in paths:
        (sols / p.name).mkdir(parents=True)
        sol = reference_solution(load_problem(p))
        (sols / p.name / "eager.json").write_text(json.dumps(sol.model_dump(mode="json", exclude_none=True)))

    def planned(**kw):
        return {pp.problem.name: len(pp.todo) for pp in plan_run(paths, sols, set(), **kw).pairs}

    assert planned() == {"add2": 1, "grouped": 1}
    assert planned(exclude_tags=[NEEDS_CUDA]) == {"add2": 1, "grouped": 0}
    assert planned(tags=[NEEDS_CUDA]) == {"add2": 0, "grouped": 1}
