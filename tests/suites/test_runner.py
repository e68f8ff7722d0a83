"""solbench run: planning, resume keyed by (solution hash, workload uuid), load errors, and
the CLI (the evaluator is replaced by a recording one here; the real harness is exercised
in test_run_harness.py)."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.spec import Trace
from solbench.spec.trace import Correctness, Environment, Evaluation, Performance, Status
from solbench.suites import DATA_ROOT
from solbench.run import plan as R
from solbench.run.executors.local import execute
from solbench.suites.runner import write_eager_candidates

PROBS = ["relu_fp32", "gelu_fp32", "tanh_fp32"]
EAGER = {
    "relu_fp32": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
    "gelu_fp32": "import torch\nimport torch.nn.functional as F\n\ndef run(x):\n    return F.gelu(x)\n",
    "tanh_fp32": "import torch\n\ndef run(x):\n    return torch.tanh(x)\n",
}


@pytest.fixture
def tree(tmp_path):
    probs = tmp_path / "probs"
    sols = tmp_path / "sols"
    for n in PROBS:
        shutil.copytree(DATA_ROOT / "l1" / n, probs / n)
        (sols / n).mkdir(parents=True)
        (sols / n / "eager.py").write_text(EAGER[n])
        (sols / n / "twice.py").write_text(EAGER[n].replace("def run", "def _r") +
                                           "\ndef run(x):\n    return _r(x)\n")
    return probs, sols


class Recorder:
    """Evaluator that records its calls and returns PASSED traces (speedup 2 for 'twice')."""

    def __init__(self, fail_on_call=None):
        self.calls = []
        self.fail_on_call = fail_on_call

    def __call__(self, problem, solution, device, uuids):
        self.calls.append((problem.name, solution.name, tuple(uuids)))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("worker pool died")
        out = []
        for u in uuids:
            w = problem.workload(u)
            sp = 2.0 if solution.name == "twice" else 1.0
            ev = Evaluation(status=Status.PASSED, correctness=Correctness(),
                            performance=Performance(latency_ms=1.0 / sp, reference_latency_ms=1.0,
                                                    speedup_factor=sp),
                            environment=Environment(hardware=device))
            out.append(Trace(definition=problem.name, solution=solution.name, workload=w, evaluation=ev))
        return out


def _paths(probs):
    return sorted(probs.iterdir())


def test_candidate_files_skip_sources_of_a_json(tmp_path):
    from solbench.spec import load_problem

    prob = load_problem(DATA_ROOT / "l1" / "relu_fp32")
    d = tmp_path / "relu_fp32"
    d.mkdir()
    (d / "k.py").write_text(EAGER["relu_fp32"])
    (d / "triton.json").write_text(json.dumps({
        "name": "relu_triton", "definition": "relu_fp32",
        "spec": {"languages": ["pytorch"], "entry_point": "k.py::run",
                 "destination_passing_style": False},
        "sources": [{"path": "k.py", "content": ""}]}))
    (d / "_helper.py").write_text("x = 1\n")
    files = R.candidate_files(tmp_path, prob)
    assert [f.name for f in files] == ["triton.json"]
    cand = R.load_candidate(files[0], prob)
    assert cand.solution is not None and cand.solution.source("k.py") == EAGER["relu_fp32"]


def test_resume_half_way_skips_done_pairs(tree, tmp_path):
    probs, sols = tree
    out = tmp_path / "results.jsonl"
    plan = R.plan_run(_paths(probs), sols, set(), tags=["cpu"])
    assert len(plan.pairs) == 6 and plan.todo_workloads == 6
    # first run dies (harness failure) on the 4th pair: 3 pairs written, the 4th not
    rec = Recorder(fail_on_call=4)
    outcome = execute(plan, out, "cpu", evaluator=rec)
    assert len(outcome.traces) == 5 and len(outcome.harness_errors) == 1
    assert "worker pool died" in outcome.harness_errors[0]
    written = R.read_results(out)
    assert len(written) == 5 and all(t.evaluation.solution_hash for t in written)
    # resume: only the failed pair is left
    plan2 = R.plan_run(_paths(probs), sols, R.done_keys(written), tags=["cpu"])
    assert plan2.todo_workloads == 1 and plan2.skipped_workloads == 5
    rec2 = Recorder()
    execute(plan2, out, "cpu", evaluator=rec2)
    assert rec2.calls == [rec.calls[3]]
    assert len(R.read_results(out)) == 6
    # a changed solution has a new hash: evaluated again; the others stay skipped
    (sols / "tanh_fp32" / "eager.py").write_text(EAGER["tanh_fp32"] + "# v2\n")
    plan3 = R.plan_run(_paths(probs), sols, R.done_keys(R.read_results(out)), tags=["cpu"])
    todo = [(p.problem.name, p.candidate.label) for p in plan3.pairs if p.todo]
    assert todo == [("tanh_fp32", "eager")]
    # without the tag filter every workload of every pair is planned
    plan4 = R.plan_run(_paths(probs), sols, R.done_keys(R.read_results(out)))
    n_all = sum(len(p.problem.workloads) for p in plan4.pairs)
    assert plan4.todo_workloads == n_all - 5


def test_unloadable_candidate_becomes_compile_error_traces(tree, tmp_path):
    probs, sols = tree
    (sols / "relu_fp32" / "broken.json").write_text("{not json")
    plan = R.plan_run(_paths(probs)[1:2], sols, set(), tags=["cpu"])  # relu_fp32 only
    assert plan.pairs[0].problem.name == "relu_fp32"
    bad = [p for p in plan.pairs if p.candidate.label == "broken"][0]
    assert bad.candidate.solution is None and "invalid JSON" in bad.candidate.load_error
    rec = Recorder()
    outcome = execute(plan, tmp_path / "r.jsonl", "cpu", evaluator=rec)
    st = {t.solution: t.evaluation.status for t in outcome.traces}
    assert st["relu_fp32__broken"] == Status.COMPILE_ERROR
    assert len(rec.calls) == 2  # the two loadable candidates only


def test_cli_run_resume_and_summary(tree, tmp_path, monkeypatch):
    from solbench.cli import app

    probs, sols = tree
    rec = Recorder()
    from solbench.run import session

    monkeypatch.setattr(session, "make_default_evaluator", lambda config=None: rec)
    out = tmp_path / "res.jsonl"
    args = ["run", str(probs), "--solutions", str(sols), "-o", str(out), "--tag", "cpu",
            "--device", "cpu", "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["evaluated_now"] == 6
    s = data["summary"]
    assert s["eager"]["win_rate"] == 0.0 and s["eager"]["correct_rate"] == 1.0
    assert s["twice"]["win_rate"] == 1.0 and s["twice"]["median_speedup"] == 2.0
    assert s["all"]["fast_p"] == {"0": 1.0, "1": 0.5, "1.5": 0.5, "2": 0.0}
    assert len(data["problems"]) == 6
    # an existing results file needs --resume or --overwrite
    r2 = CliRunner().invoke(app, args)
    assert r2.exit_code == 2 and "--resume" in r2.output
    r3 = CliRunner().invoke(app, args + ["--resume"])
    assert r3.exit_code == 0, r3.output
    d3 = json.loads(r3.stdout)
    assert d3["evaluated_now"] == 0 and d3["summary"]["all"]["units"] == 6
    assert len(rec.calls) == 6
    # problem filter + overwrite
    r4 = CliRunner().invoke(app, args + ["--overwrite", "--problem", "gelu*"])
    assert r4.exit_code == 0 and json.loads(r4.stdout)["evaluated_now"] == 2


def test_cli_run_bad_target():
    from solbench.cli import app

    r = CliRunner().invoke(app, ["run", "no_such_suite", "--solutions", "."])
    assert r.exit_code == 2 and "no such suite" in r.output


def test_exclude_tag_and_shards_partition_the_plan(tree):
    probs, sols = tree
    paths = _paths(probs)  # gelu_fp32, relu_fp32, tanh_fp32
    full = R.plan_run(paths, sols, set())
    no_cpu = R.plan_run(paths, sols, set(), exclude_tags=["cpu"], workload_limit=1)
    for p in no_cpu.pairs:
        # the first workload that is not cpu-tagged: each l1 problem lists its cpu one first
        assert [w.uuid for w in p.todo] == [p.problem.workloads[1].uuid]
        assert "cpu" not in (p.todo[0].tags or [])
    # two shards: problems 0 and 2 in one, problem 1 in the other; together the full plan
    s0 = R.plan_run(paths, sols, set(), shard=(0, 2))
    s1 = R.plan_run(paths, sols, set(), shard=(1, 2))
    names = lambda pl: sorted({p.problem.name for p in pl.pairs})  # noqa: E731
    assert names(s0) == ["gelu_fp32", "tanh_fp32"] and names(s1) == ["relu_fp32"]
    assert s0.todo_workloads + s1.todo_workloads == full.todo_workloads
    with pytest.raises(ValueError, match="shard 2/2"):
        R.plan_run(paths, sols, set(), shard=(2, 2))


def test_cli_run_rejects_a_bad_shard(tree, tmp_path):
    from solbench.cli import app
    probs, sols = tree
    res = CliRunner().invoke(app, ["run", str(probs), "--solutions", str(sols), "--shard", "3",
                                   "-o", str(tmp_path / "r.jsonl"), "--device", "cpu"])
    assert res.exit_code == 2 and "--shard" in res.output
