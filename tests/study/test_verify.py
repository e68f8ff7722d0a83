"""solbench verify and the per-model table, with figures worked out by hand: which units claim a
speedup, the verdict of each re-measurement, fast_p as KernelBench defines it (correct AND
speedup > p over all units), verified-only counting, signed records; and the real
re-evaluation in a fresh process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solbench.report.models import category_of, model_rows, read_verifications, verify_path
from solbench.report.records import label_for
from solbench.spec import Trace, load_problem
from solbench.inputs.seeds import fingerprint
from solbench.spec.generation import ModelConfig
from solbench.study.verify import _eval_subprocess, claims, verify
from solbench.suites import DATA_ROOT
from solbench.run.plan import load_candidate

CONV, RELU, SUM = "conv1d_fp32", "relu_fp32", "sum_dim1_fp32"


def trace(definition, label, h, w, status="PASSED", speedup=None, n=10, seed="ab"):
    ev = {"status": status, "environment": {"hardware": "cpu"}, "solution_hash": h,
          "device": "cpu", "input_seed": seed, "log": "" if status == "PASSED" else f"{status} here"}
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": 10.0 / speedup, "reference_latency_ms": 10.0,
                             "speedup_factor": speedup}
        ev["timing"] = {"method": "perf_counter", "median_ms": 10.0 / speedup, "iqr_ms": 0.1,
                        "min_ms": None, "mean_ms": None, "n_samples": n, "warmup": 1,
                        "cold_l2": True, "resolved": True}
    return Trace.model_validate({"definition": definition, "solution": label,
                                 "workload": {"uuid": w, "axes": {}, "inputs": {}}, "evaluation": ev})


def lab(model, sample=0):
    return ModelConfig(model, 0.0, sample).label()


@pytest.fixture
def study(tmp_path):
    """Candidate files for A (2 samples) and B, and their traces as solbench run would write
    them (speedups chosen so each case of the rules shows)."""
    sols = tmp_path / "sols"
    hashes = {}
    for prob in (CONV, RELU, SUM):
        p = load_problem(DATA_ROOT / "l1" / prob)
        for label in (lab("A"), lab("A", 1), lab("B")):
            f = sols / prob / f"{label}.py"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(f"import torch\n\n# {label}\ndef run(*args):\n    raise NotImplementedError\n")
            hashes[(prob, label)] = load_candidate(f, p).solution_hash
    A0, A1, B = lab("A"), lab("A", 1), lab("B")

    def t(prob, label, w, *a, **k):
        return trace(prob, label, hashes[(prob, label)], w, *a, **k)

    traces = [
        t(CONV, A0, "c0", speedup=2.0), t(RELU, A0, "r0", speedup=1.2),           # claims 2.0, 1.2
        t(CONV, A1, "c0", speedup=3.0), t(RELU, A1, "r0", "INCORRECT_NUMERICAL"),  # claim 3.0
        t(CONV, B, "c0", speedup=0.8), t(RELU, B, "r0", "COMPILE_ERROR"),          # no claim
        t(SUM, B, "s0", speedup=4.0), t(SUM, B, "s1", speedup=1.0),                # geomean 2.0: claim
    ]
    # what the re-evaluation measures, per (problem, label): speedups or a status
    again = {(CONV, A0): [1.5], (RELU, A0): [0.9], (CONV, A1): ["INCORRECT_NUMERICAL"],
             (SUM, B): [2.0, 0.5]}
    return sols, traces, hashes, again


def test_claims_are_correct_units_above_one(study):
    _, traces, _, _ = study
    got = {(c.definition, c.solution): round(c.speedup, 9) for c in claims(traces)}
    assert got == {(CONV, lab("A")): 2.0, (RELU, lab("A")): 1.2, (CONV, lab("A", 1)): 3.0,
                   (SUM, lab("B")): 2.0}


def test_verify_verdicts_and_table(study, tmp_path):
    sols, traces, hashes, again = study
    calls = []

    def reeval(ppath, spath, uuids, iters, seed, device):
        calls.append((ppath.name, spath.stem, uuids, iters, seed))
        key = (ppath.name, spath.stem)
        out = []
        for w, v in zip(uuids, again[key]):
            if isinstance(v, str):
                out.append(trace(key[0], key[1], None, w, v, seed=hex(seed)[2:]))
            else:
                out.append(trace(key[0], key[1], None, w, speedup=v, n=iters, seed=hex(seed)[2:]))
        return out, ""

    out = tmp_path / "results.jsonl.verify.jsonl"
    recs = verify(traces, sols, out, reevaluate=reeval)
    by = {(r["definition"], r["solution"]): r for r in recs}
    assert {k: r["verdict"] for k, r in by.items()} == {
        (CONV, lab("A")): "verified", (RELU, lab("A")): "not_reproduced",
        (CONV, lab("A", 1)): "failed", (SUM, lab("B")): "not_reproduced"}
    # both figures kept; the geometric mean of 2.0 and 0.5 is 1.0, not above 1
    r = by[(SUM, lab("B"))]
    assert r["claimed_speedup"] == pytest.approx(2.0) and r["verified_speedup"] == pytest.approx(1.0)
    assert [w["verdict"] for w in r["workloads"]] == ["verified", "not_reproduced"]
    assert by[(RELU, lab("A"))]["workloads"][0]["claimed"]["speedup"] == 1.2
    assert by[(RELU, lab("A"))]["workloads"][0]["measured"]["speedup"] == 0.9
    assert by[(CONV, lab("A", 1))]["workloads"][0]["measured"]["log"] == "INCORRECT_NUMERICAL here"
    # more timed calls (max(20, 2 x 10)) and a new seed each time, never the claim's own
    assert all(c[3] == 20 for c in calls) and len({c[4] for c in calls}) == 4
    assert all(hex(c[4])[2:] != "ab" for c in calls)

    vers = read_verifications([out])
    assert len(vers) == 4
    rows = {r.config: r for r in model_rows(traces, lambda t: label_for(t, {}), vers)}
    a, b = rows["A T=0 turn 1"], rows["B T=0 turn 1"]
    # A: 4 units (conv s0 2.0x, relu s0 1.2x, conv s1 3.0x, relu s1 incorrect)
    assert (a.units, a.correct, a.correct_rate, a.compiled_rate) == (4, 3, 0.75, 1.0)
    assert (a.fast_1, a.fast_1_5, a.fast_2) == (0.75, 0.5, 0.25)
    assert (a.claimed, a.checked, a.verified, a.verified_median, a.not_reproduced) == (3, 3, 1, 1.5, 2)
    # B: conv 0.8x, relu compile error, sum 2.0x (not reproduced)
    assert (b.units, b.correct, b.compiled_rate) == (3, 2, pytest.approx(2 / 3))
    assert (b.fast_1, b.fast_1_5, b.fast_2) == (pytest.approx(1 / 3), pytest.approx(1 / 3), 0.0)
    assert (b.claimed, b.verified, b.verified_median) == (1, 0, None)
    assert a.categories == {"activation": {"units": 2, "correct_rate": 0.5, "verified": 0},
                            "convolution": {"units": 2, "correct_rate": 1.0, "verified": 1}}
    # verified only: A's one verified speedup is 1.5x (> 1, not > 1.5)
    va = {r.config: r for r in model_rows(traces, lambda t: label_for(t, {}), vers, verified_only=True)}
    assert (va["A T=0 turn 1"].fast_1, va["A T=0 turn 1"].fast_1_5) == (0.25, 0.0)
    assert va["B T=0 turn 1"].fast_1 == 0.0

    # an edited record is not read: its MAC no longer verifies
    lines = out.read_text().splitlines()
    edited = [json.loads(x) for x in lines]
    for e in edited:
        if e["verdict"] == "not_reproduced":
            e["verdict"] = "verified"
    out.write_text("\n".join(json.dumps(e) for e in edited) + "\n")
    assert {v["verdict"] for v in read_verifications([out]).values()} == {"verified", "failed"}
    assert len(read_verifications([out])) == 2


def test_missing_candidate_is_never_verified(study, tmp_path):
    sols, traces, _, _ = study
    (sols / CONV / f"{lab('A')}.py").write_text("import torch\n\ndef run(x):\n    return x  # changed\n")
    recs = verify([t for t in traces if t.definition == CONV and t.solution == lab("A")], sols,
                  tmp_path / "v.jsonl", reevaluate=lambda *a: pytest.fail("must not run"))
    assert [r["verdict"] for r in recs] == ["missing"]
    assert "no candidate with hash" in recs[0]["error"]


def test_categories():
    assert category_of("conv2d_3x3_fp32") == "convolution"
    assert category_of("relu_fp32") == "activation"
    assert category_of("sum_dim1_fp32") == "reduction"
    assert category_of("1_Square_matrix_multiplication_") == "matmul"
    assert category_of("23_Softmax") == "normalization"
    assert category_of("weird_op") == "other"
    assert verify_path(Path("a/r.jsonl")) == Path("a/r.jsonl.verify.jsonl")


@pytest.mark.slow
def test_reevaluation_runs_in_a_fresh_process(tmp_path):
    """The default re-evaluation: solbench eval in a new interpreter, with the seed and timed
    calls asked for."""
    sol = tmp_path / "relu.py"
    sol.write_text("import torch\n\ndef run(x):\n    return torch.clamp(x, min=0)\n")
    p = load_problem(DATA_ROOT / "l1" / RELU)
    w = p.smallest_workloads(1)[0]
    seed = 0x1234_5678_9ABC
    traces, err = _eval_subprocess(DATA_ROOT / "l1" / RELU, sol, [w.uuid], 12, seed, "cpu",
                                   tmp_path / "t.jsonl", 600)
    assert err == "" and len(traces) == 1
    ev = traces[0].evaluation
    assert ev.status.value == "PASSED" and ev.timing.n_samples == 12
    assert ev.input_seed == fingerprint(seed)  # the trace records the base seed's fingerprint only
    assert ev.executor is None or ev.executor.pid != __import__("os").getpid()


def test_a_speedup_inside_its_own_noise_is_not_verified(study):
    """1.05x whose latency interquartile ranges overlap the reference's is not reproduced; the
    same median with tight samples is."""
    from solbench.study.verify import judge

    _, traces, _, _ = study
    c = [x for x in claims(traces) if x.definition == RELU][0]

    def measured(cand, ref):
        t = trace(RELU, c.solution, None, "r0", speedup=10.0 / cand[len(cand) // 2])
        ev = t.evaluation
        ev.timing.samples_ms = cand
        ev.reference_timing = ev.timing.model_copy(update={"samples_ms": ref, "median_ms": ref[len(ref) // 2]})
        return t

    wide = measured([8.0, 9.0, 9.5, 10.0, 11.0], [8.5, 9.5, 10.0, 10.5, 11.5])
    tight = measured([9.4, 9.5, 9.5, 9.5, 9.6], [9.9, 10.0, 10.0, 10.0, 10.1])
    r = judge(c, [wide], "", 1, 20)
    assert r["verdict"] == "not_reproduced" and r["verified_speedup"] == pytest.approx(10.0 / 9.5)
    # interval low end: ref Q1 / cand Q3 = 9.5 / 10.0
    assert r["verified_speedup_low"] == pytest.approx(0.95)
    r = judge(c, [tight], "", 1, 20)
    assert r["verdict"] == "verified" and r["verified_speedup_low"] == pytest.approx(10.0 / 9.5)


def test_table_keeps_bracketed_model_names():
    """A model name with brackets is printed as written (rich markup would eat "[fp8]")."""
    import io

    from rich.console import Console

    from solbench.report.models import rich_tables

    ts = [trace(RELU, ModelConfig("qwen[fp8]", 0.0).label(), "h", "r0", speedup=0.9)]
    rows = model_rows(ts, lambda t: label_for(t, {}))
    buf = io.StringIO()
    con = Console(file=buf, width=250)
    for t in rich_tables(rows):
        con.print(t)
    assert "qwen[fp8] T=0 turn 1" in buf.getvalue()
