"""Every SOL-ExecBench dev problem loads unchanged; ``solbench validate`` accepts the whole
dataset; the FlashInfer problems whose inputs are safetensors blobs (not shipped) give a
MissingBlobError naming the workload and the input."""

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solbench.errors import MissingBlobError
from solbench.inputs import make_inputs
from solbench.spec import load_problem
from solbench.spec.workload import SafetensorsInput

DEV = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "sol-execbench-dev"
DEV_DIRS = sorted(p.parent for p in DEV.rglob("definition.json")) if DEV.is_dir() else []
needs_dev = pytest.mark.skipif(not DEV_DIRS, reason=f"dev dataset not found at {DEV}")

#: FlashInfer problems whose workloads read index tensors from safetensors blobs
BLOB_PROBLEMS = [
    "FlashInfer-Bench/012_gqa_paged_decode_h32_kv4_d128_ps1",
    "FlashInfer-Bench/016_gqa_ragged_prefill_causal_h32_kv4_d128",
    "FlashInfer-Bench/020_moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
]


@needs_dev
@pytest.mark.parametrize("pdir", DEV_DIRS, ids=[f"{p.parent.name}/{p.name}" for p in DEV_DIRS])
def test_dev_problem_loads_unchanged(pdir):
    prob = load_problem(pdir)
    raw_lines = [json.loads(x) for x in (pdir / "workload.jsonl").read_text().splitlines() if x.strip()]
    raw_def = json.loads((pdir / "definition.json").read_text())
    assert prob.name == pdir.name == raw_def["name"]
    assert [w.uuid for w in prob.workloads] == [x["uuid"] for x in raw_lines]
    assert list(prob.definition.inputs) == list(raw_def["inputs"])
    assert list(prob.definition.outputs) == list(raw_def["outputs"])
    # the reference is untouched Python with a top-level run
    tree = ast.parse(prob.definition.reference)
    assert "run" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for w, raw in zip(prob.workloads, raw_lines):
        env = prob.definition.resolve_axes(w.axes)
        assert {k: env[k] for k in raw["axes"]} == raw["axes"]
        tol = raw.get("tolerance") or {}
        ratio = tol.get("required_matched_ratio", tol.get("required_match_ratio"))
        if ratio is not None:  # both spellings of the public data land on one field
            assert w.tolerance_or_default().required_matched_ratio == ratio
        if "max_atol" in tol:
            assert w.tolerance_or_default().max_atol == tol["max_atol"]
        if tol.get("allow_negative_inf"):
            assert w.tolerance_or_default().allow_negative_inf is True


@needs_dev
def test_validate_cli_accepts_whole_dataset():
    from solbench.cli import app

    r = CliRunner().invoke(app, ["validate", str(DEV)])
    assert r.exit_code == 0, r.output
    assert f"{len(DEV_DIRS)} valid, 0 invalid" in r.stdout
    assert len(DEV_DIRS) == 59
    assert "INVALID" not in r.output and "Traceback" not in r.output
    # problems whose blobs are missing still validate, with a warning naming a blob
    for name in BLOB_PROBLEMS:
        line = next(x for x in r.stdout.splitlines() if Path(name).name in x)
        assert "safetensors input(s) have no blob on disk" in line


@needs_dev
@pytest.mark.parametrize("name", BLOB_PROBLEMS, ids=[Path(n).name[:12] for n in BLOB_PROBLEMS])
def test_missing_safetensors_blob_names_workload_and_input(name, monkeypatch):
    monkeypatch.delenv("FLASHINFER_TRACE_DIR", raising=False)
    prob = load_problem(DEV / name)
    w = prob.workloads[0]
    blob_inputs = [k for k, s in w.inputs.items() if isinstance(s, SafetensorsInput)]
    assert blob_inputs
    first = next(k for k in prob.definition.inputs if k in blob_inputs)  # definition order
    with pytest.raises(MissingBlobError) as ei:
        make_inputs(prob, w, seed=0)
    e = ei.value
    assert e.field == f"workload {w.uuid}.inputs.{first}"
    assert e.path == w.inputs[first].path
    assert w.uuid in str(e) and first in str(e)
    # every safetensors input of every workload is listed as missing
    n_expected = sum(isinstance(s, SafetensorsInput) for ww in prob.workloads for s in ww.inputs.values())
    assert len(prob.missing_blobs()) == n_expected
