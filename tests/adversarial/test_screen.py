"""Trivial-candidate screen: verdicts on tiny problems worked out by hand, and the CLI.

- softmax over 32768 columns of randn: every output is ~e^x/(32768*e^{1/2}) <= ~1e-3, so
  1e-6 and the mean 1/32768 are within atol = 1e-2 (upstream passes: degenerate; all-zeros
  is refused by upstream's own all-zero rule); their relative L2 errors are ~1 and
  sqrt(1 - 1/e) ~ 0.80, so solbench's check fails them.
- clamp(x, -100, 100) of randn is the identity: passthrough:x equals the reference exactly,
  so it passes both modes.
- GELU (fp32, tol 1e-2): bf16 inputs give ~3e-3 relative error per element, inside
  atol + rtol*|ref|, so the tolerance admits a bf16 (and fp16) downgrade.
- matmul with K = 512 (tol 1e-2): bf16 inputs match only ~87% of elements (< 0.99) but fp16
  inputs ~99.8%: admits fp16, not bf16.
- RMSNorm in bf16: no fp32 output, so no downgrade finding.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.integrity.screen import screen_problem
from solbench.spec import load_problem

HERE = Path(__file__).parent
P = HERE / "problems"


def passing(res, mode):
    return {(p.candidate, p.output) for p in res.passing_trivial if p.mode == mode}


def test_long_softmax_is_degenerate_and_solbench_catches_every_stand_in():
    res = screen_problem(load_problem(P / "softmax_long_f32"))
    assert res.degenerate
    assert passing(res, "upstream") == {("tiny_constant", "out"), ("mean", "out")}
    zeros = [r for r in next(iter(res.details["workloads"].values()))["trivial"] if r["candidate"] == "zeros"]
    assert zeros[0]["failed_check"] == "all_zero"
    assert passing(res, "solbench") == set()
    assert res.screened_workloads and not res.skipped


def test_exact_identity_is_structural_not_degenerate():
    # clamp(randn, -100, 100) is bit-identical to its input: the passthrough is the answer
    res = screen_problem(load_problem(P / "clamp_f32"))
    assert not res.degenerate and res.passing_trivial == []
    assert [s["candidate"] for s in res.details["structural"]] == ["passthrough:x"]


def test_gelu_is_not_degenerate_but_admits_downgrade():
    res = screen_problem(load_problem(P / "gelu_f32"))
    assert not res.degenerate and res.passing_trivial == []
    assert res.admits_downgrade and set(res.downgrade_dtypes) == {"bfloat16", "float16"}


def test_matmul_admits_fp16_not_bf16():
    res = screen_problem(load_problem(P / "matmul_f32"))
    assert not res.degenerate
    assert res.downgrade_dtypes == ["float16"]


def test_bf16_problem_has_no_downgrade_finding():
    res = screen_problem(load_problem(P / "rmsnorm_bf16"))
    assert not res.degenerate and not res.admits_downgrade
    wd = next(iter(res.details["workloads"].values()))
    assert wd["downgrade"] == []


def test_kernelbench_problem_screens():
    res = screen_problem(load_problem(P / "kb_linear.py"))
    assert not res.degenerate
    assert len(res.screened_workloads) == 1


def test_cli_json_is_strict_and_has_the_contract_keys():
    out = subprocess.run(
        [sys.executable, "-c", "from solbench.cli import main; main()", "audit",
         str(P / "softmax_long_f32"), "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    doc = json.loads(out)
    assert {"degenerate", "passing_trivial", "admits_downgrade", "details"} <= set(doc)
    assert doc["degenerate"] is True
    assert {"candidate", "workload", "output", "mode"} <= set(doc["passing_trivial"][0])


DEV = HERE.parents[1].parent / "shared" / "datasets" / "sol-execbench-dev"


@pytest.mark.skipif(not DEV.is_dir(), reason="dev dataset not present")
def test_dev_problem_with_missing_blobs_records_why():
    for d in sorted((DEV / "FlashInfer-Bench").iterdir()):
        prob = load_problem(d)
        missing = prob.missing_blobs()
        if missing:
            break
    else:
        pytest.skip("no FlashInfer-Bench problem with a missing blob")
    res = screen_problem(prob, workloads=[missing[0][0]], downgrade=False)
    assert res.screened_workloads == []
    assert len(res.skipped) == 1 and "blob" in res.skipped[0]["reason"]


# ---------------------------------------------------------------- stress rounds (issue 13)
#: a softmax-class reference that overflows itself on the stress inputs' large logits: exp
#: of a logit above ~88.7 is inf in float32 (the upstream randn inputs stay near 0)
OVERFLOW_DEF = {
    "name": "softmax_of_exp", "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["m", "n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["m", "n"], "dtype": "float32"}},
    "reference": "import torch\n\ndef run(x):\n    return torch.softmax(torch.exp(x), dim=-1)\n"}


def _write(root, definition, workloads):
    root.mkdir(parents=True)
    (root / "definition.json").write_text(json.dumps(definition))
    (root / "workload.jsonl").write_text("\n".join(json.dumps(w) for w in workloads) + "\n")
    return root


def test_stress_rounds_the_reference_fails_are_listed_per_workload(tmp_path):
    d = _write(tmp_path / "p", OVERFLOW_DEF, [
        {"uuid": "w8", "axes": {"m": 8}, "inputs": {"x": {"type": "random"}}},
        {"uuid": "w4", "axes": {"m": 4}, "inputs": {"x": {"type": "random"}}}])
    res = screen_problem(load_problem(d), downgrade=False)
    # both stress rounds of the softmax class (501 stress, 502 stress_sparse), both workloads
    assert [(r["workload"], r["round"], r["label"]) for r in res.stress_reference_failed] == [
        ("w8", 501, "stress:softmax"), ("w8", 502, "stress_sparse:softmax"),
        ("w4", 501, "stress:softmax"), ("w4", 502, "stress_sparse:softmax")]
    assert all("NaN/Inf" in r["reason"] for r in res.stress_reference_failed)
    assert not res.degenerate  # a separate finding: the screen's verdicts are unchanged
    # the same problem's honest softmax reference holds on the same inputs
    ok = _write(tmp_path / "q", {**OVERFLOW_DEF, "name": "softmax_plain",
                                 "reference": "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"},
                [{"uuid": "w8", "axes": {"m": 8}, "inputs": {"x": {"type": "random"}}}])
    res = screen_problem(load_problem(ok), downgrade=False)
    assert res.stress_reference_failed == []
    assert [(r["round"], r["reference_failed"]) for r in res.details["workloads"]["w8"]["stress"]] == [
        (501, False), (502, False)]
    assert screen_problem(load_problem(d), downgrade=False, stress=False).stress_reference_failed == []


def test_cli_lists_stress_reference_failed(tmp_path):
    d = _write(tmp_path / "p", OVERFLOW_DEF, [{"uuid": "w8", "axes": {"m": 8}, "inputs": {"x": {"type": "random"}}}])
    run = [sys.executable, "-c", "from solbench.cli import main; main()", "audit", str(d), "--no-downgrade"]
    doc = json.loads(subprocess.run(run + ["--json"], capture_output=True, text=True, timeout=120,
                                    check=True).stdout)
    assert [(r["workload"], r["round"]) for r in doc["stress_reference_failed"]] == [("w8", 501), ("w8", 502)]
    text = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True,
                          env={**__import__("os").environ, "COLUMNS": "200"}).stdout
    assert "stress rounds the reference itself fails" in text
    assert "501 (stress:softmax)" in text and "502 (stress_sparse:softmax)" in text
