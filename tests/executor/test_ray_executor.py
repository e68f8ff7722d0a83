"""`--executor ray` on a local CPU Ray cluster (several workers) with the real harness: the same
verdicts as the local executor for the same seed, the results file's ordering, resume, and a
worker killed mid-pair (retried elsewhere, marked, nothing lost or written twice).

Problems: two tiny copies of bundled l1 activations (3 workloads of a few thousand elements
each), so one pair costs a few seconds on the CPU."""

import json
import os
import shutil
import signal
import threading
from collections import Counter

import pytest
from typer.testing import CliRunner

from solbench.suites import DATA_ROOT
from solbench.suites import runner as R
from solbench.suites.executors import RayExecutor, canonical_key

ray = pytest.importorskip("ray", reason="ray not installed (pip install 'solbench[ray]')")

pytestmark = pytest.mark.slow

SHAPES = [(8, 1000), (4, 100), (16, 64)]
GOOD = {"relu_fp32": "import torch\n\ndef run(x):\n    return torch.relu(x)\n",
        "leaky_relu_fp32": None}
OPTS = {"iters": 3, "rounds": 2, "seed": 0x5eed}


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Two problems x candidates: relu (correct, zeros, a file that does not load), leaky
    relu (its reference, as written by write_eager_candidates)."""
    root = tmp_path_factory.mktemp("suite")
    probs = root / "problems"
    for name in ("relu_fp32", "leaky_relu_fp32"):
        d = probs / name
        d.mkdir(parents=True)
        shutil.copy(DATA_ROOT / "l1" / name / "definition.json", d / "definition.json")
        first = json.loads((DATA_ROOT / "l1" / name / "workload.jsonl").read_text().splitlines()[0])
        lines = []
        for k, (r, c) in enumerate(SHAPES):
            w = dict(first, uuid=f"{name}-w{k}", axes={"rows": r, "cols": c})
            lines.append(json.dumps(w))
        (d / "workload.jsonl").write_text("\n".join(lines) + "\n")
    sols = root / "sols"
    (sols / "relu_fp32").mkdir(parents=True)
    (sols / "relu_fp32" / "good.py").write_text(GOOD["relu_fp32"])
    (sols / "relu_fp32" / "zeros.py").write_text(
        "import torch\n\ndef run(x):\n    return torch.zeros_like(x)\n")
    (sols / "relu_fp32" / "broken.py").write_text("def run(x):\n    return (\n")
    paths = sorted(p for p in probs.iterdir())
    R.write_eager_candidates([probs / "leaky_relu_fp32"], sols)
    return paths, sols


def _children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _plan(suite, done=frozenset()):
    paths, sols = suite
    return R.plan_run(paths, sols, set(done))


def _verdict(t):
    e = t.evaluation
    c = e.correctness
    return (e.status.value, e.input_seed,
            None if c is None else (c.max_absolute_error, c.max_relative_error))


def _check_file(path, plan):
    """Every (solution hash, workload) of the plan exactly once; each pair's traces contiguous
    and in the problem's workload order; seq 1..n in file order."""
    traces = R.read_results(path)
    keys = [R.result_key(t) for t in traces]
    want = {(p.candidate.solution_hash, w.uuid) for p in plan.pairs for w in p.todo}
    assert Counter(keys) == Counter(want)
    order = {p.candidate.solution_hash: [w.uuid for w in p.todo] for p in plan.pairs}
    runs = []
    for t in traces:
        h = t.evaluation.solution_hash
        if not runs or runs[-1][0] != h:
            runs.append((h, []))
        runs[-1][1].append(t.workload.uuid)
    assert [h for h, _ in runs] == list(dict.fromkeys(h for h, _ in runs))  # contiguous
    for h, uuids in runs:
        assert uuids == order[h]
    return traces


def test_ray_matches_local_verdicts_and_orders_its_file(cluster, suite, tmp_path):
    plan = _plan(suite)
    assert len(plan.pairs) == 4 and plan.todo_workloads == 12
    local = R.execute(plan, tmp_path / "local.jsonl", "cpu", eval_options=OPTS)
    assert not local.harness_errors
    ex = RayExecutor(workers=2)
    out = ex.run(_plan(suite), tmp_path / "ray.jsonl", "cpu", eval_options=OPTS)
    assert not out.harness_errors
    traces = _check_file(tmp_path / "ray.jsonl", plan)
    assert [t.evaluation.executor["seq"] for t in traces] == list(range(1, 13))
    assert {t.evaluation.executor["worker"] for t in traces if t.evaluation.executor["pid"] != os.getpid()} \
        == {"w0", "w1"}  # both workers took pairs
    assert all(t.evaluation.executor["gpu_uuid"] is None and not t.evaluation.executor["retried"]
               for t in traces)
    a = sorted(R.read_results(tmp_path / "local.jsonl"), key=canonical_key)
    b = sorted(traces, key=canonical_key)
    assert [canonical_key(t) for t in a] == [canonical_key(t) for t in b]
    assert [_verdict(t) for t in a] == [_verdict(t) for t in b]
    st = Counter(t.evaluation.status.value for t in b)
    assert st == {"PASSED": 6, "INCORRECT_NUMERICAL": 3, "COMPILE_ERROR": 3}
    # with the same seed the inputs are the same, so the errors are the same numbers
    assert all(t.evaluation.input_seed == format(OPTS["seed"], "x") for t in b
               if t.evaluation.status.value != "COMPILE_ERROR")


def test_ray_resume_skips_finished_pairs(cluster, suite, tmp_path):
    out_path = tmp_path / "r.jsonl"
    first = _plan(suite)
    first.pairs = [p for p in first.pairs if p.problem.name == "leaky_relu_fp32"]
    RayExecutor(workers=2).run(first, out_path, "cpu", eval_options=OPTS)
    assert len(R.read_results(out_path)) == 3
    resumed = _plan(suite, R.done_keys(R.read_results(out_path)))
    assert resumed.skipped_workloads == 3 and resumed.todo_workloads == 9
    evaluated = RayExecutor(workers=2).run(resumed, out_path, "cpu", eval_options=OPTS)
    assert len(evaluated.traces) == 9
    _check_file(out_path, _plan(suite))
    # nothing left: a third run evaluates nothing and starts no worker
    again = _plan(suite, R.done_keys(R.read_results(out_path)))
    ex = RayExecutor(workers=2)
    assert ex.run(again, out_path, "cpu", eval_options=OPTS).traces == [] and ex.slots == []


def test_killed_worker_pair_is_retried_elsewhere_and_marked(cluster, suite, tmp_path):
    killed = {}

    def on_dispatch(pair, worker, attempt):
        # SIGKILL the first worker's actor process 1 s into its first pair (a pair costs
        # about 3 s here: the candidate's worker is still starting or being checked)
        if killed or worker != "w0":
            return
        pid = next(s.ident["pid"] for s in ex.slots if s.name == "w0")
        killed.update(pid=pid, pair=(pair.problem.name, pair.candidate.label))

        def kill():
            killed["children"] = _children(pid)  # its evaluation subprocesses
            os.kill(pid, signal.SIGKILL)

        threading.Timer(1.0, kill).start()

    ex = RayExecutor(workers=2, on_dispatch=on_dispatch)
    plan = _plan(suite)
    out = ex.run(plan, tmp_path / "k.jsonl", "cpu", eval_options=OPTS)
    assert killed and not out.harness_errors
    traces = _check_file(tmp_path / "k.jsonl", plan)
    hit = [t for t in traces if t.evaluation.executor["retried"]]
    assert hit, "the killed worker's pair was not marked retried"
    for t in hit:
        e = t.evaluation.executor
        assert e["attempt"] == 2 and e["lost"][0]["worker"] == "w0"
        assert e["lost"][0]["pid"] == killed["pid"] and e["pid"] != killed["pid"]
        assert any(f.check == "executor_retried" and f.severity == "advisory"
                   for f in t.evaluation.findings)
    assert len({t.evaluation.solution_hash for t in hit}) == 1  # one pair was in flight
    assert hit[0].definition == killed["pair"][0]
    # the dead worker's evaluation subprocesses did not outlive it
    assert killed["children"], "the worker was killed before it started any subprocess"
    assert [c for c in killed["children"] if _alive(c)] == []
    # the verdicts are what the pair earns, not a worker-loss artefact
    assert Counter(t.evaluation.status.value for t in traces) == \
        {"PASSED": 6, "INCORRECT_NUMERICAL": 3, "COMPILE_ERROR": 3}


def test_cli_executor_ray(cluster, suite, tmp_path):
    from solbench.cli import app

    paths, sols = suite
    out = tmp_path / "cli.jsonl"
    r = CliRunner().invoke(app, ["run", str(paths[0].parent), "--solutions", str(sols), "-o",
                                 str(out), "--device", "cpu", "--json", "--iters", "3",
                                 "--rounds", "2", "--seed", "0x5eed", "--executor", "ray",
                                 "--workers", "2", "--problem", "leaky_relu_fp32"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["evaluated_now"] == 3 and d["summary"]["eager"]["correct_rate"] == 1.0
    assert all(t.evaluation.executor["name"] == "ray" for t in R.read_results(out))
