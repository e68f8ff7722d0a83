"""solbench extract (issue 34): regions found, their counts, references checked by hand, the
checks that keep a broken region out, and the extracted problems through `solbench run` and
`solbench sol`. Tiny configs; the whole-model extractions are marked slow."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solbench.extract import extract, load_source, parse_config, region_kind
from solbench.extract.sources import ExtractError
from solbench.spec import load_problem

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=100, max_position_embeddings=512, rms_norm_eps=1e-5)
VIT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32,
           patch_size=8)
MIXTRAL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=100, num_local_experts=4, num_experts_per_tok=2,
               max_position_embeddings=128)


def _summary(report) -> dict[tuple[str, str], tuple[str, int]]:
    return {(r.kind + ("_bw" if r.backward else ""), r.cls): (r.status, r.count) for r in report.results}


def _problem(report, cls: str, backward: bool = False):
    r = next(r for r in report.results if r.cls == cls and r.backward == backward)
    assert r.status == "written", r.reason
    return load_problem(Path(r.problem_dir)), r


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama")
    src = load_source("hf:llama", LLAMA, batch=4, seq=256)
    return extract(src, out, backward=True, kinds={"norm", "mlp", "attention", "rotary", "embedding", "block"}), src


def test_problem_names():
    from solbench.extract.pipeline import _snake

    assert [_snake(n) for n in ("LlamaRMSNorm", "ViTEmbeddings", "MixtralTopKRouter", "LlamaMLP")] \
        == ["llama_rms_norm", "vit_embeddings", "mixtral_topk_router", "llama_mlp"]


def test_parse_config_and_kinds():
    assert parse_config("hidden_size=64, rms_norm_eps=1e-5,tie_word_embeddings=false,act=silu") == {
        "hidden_size": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "act": "silu"}
    with pytest.raises(ExtractError, match="not key=value"):
        parse_config("hidden_size")
    assert region_kind(torch.nn.LayerNorm(4)) == "norm"
    assert region_kind(torch.nn.Linear(4, 4)) is None
    # the MoE family's own attention, MLP and norm are not MoE blocks (Qwen2-MoE class names)
    kinds = {n: region_kind(type(n, (torch.nn.Module,), {})()) for n in (
        "Qwen2MoeAttention", "Qwen2MoeMLP", "Qwen2MoeRMSNorm", "Qwen2MoeSparseMoeBlock", "Qwen2MoeDecoderLayer",
        "Qwen2MoeTopKRouter", "Qwen2MoeExperts")}
    assert kinds == {"Qwen2MoeAttention": "attention", "Qwen2MoeMLP": "mlp", "Qwen2MoeRMSNorm": "norm",
                     "Qwen2MoeSparseMoeBlock": "moe", "Qwen2MoeDecoderLayer": "block",
                     "Qwen2MoeTopKRouter": "routing", "Qwen2MoeExperts": "experts"}
    with pytest.raises(ExtractError, match="unknown model"):
        load_source("no-such-workload")


@pytest.mark.slow
def test_llama_regions_and_counts(llama):
    report, _ = llama
    s = _summary(report)
    # 2 layers: per layer one attention, one MLP, two RMSNorms; plus the final norm, one rotary
    # embedding and one token embedding. Identical layers are one problem with their count.
    assert s[("norm", "LlamaRMSNorm")] == ("written", 5)
    assert s[("attention", "LlamaAttention")] == ("written", 2)
    assert s[("mlp", "LlamaMLP")] == ("written", 2)
    assert s[("block", "LlamaDecoderLayer")] == ("written", 2)
    assert s[("rotary", "LlamaRotaryEmbedding")] == ("written", 1)
    assert s[("embedding", "Embedding")] == ("written", 1)
    for kind in ("norm", "mlp", "attention", "block"):
        assert s[(kind + "_bw", next(c for k, c in s if k == kind))][0] == "written"
    written = [r for r in report.results if r.status == "written"]
    assert len({r.name for r in written}) == len(written)
    for r in written:  # standalone: the reference imports torch and math, nothing else
        tree = ast.parse(load_problem(Path(r.problem_dir)).definition.reference)
        mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert mods == {"torch", "math"}, (r.name, mods)
    meta = json.loads((Path(_problem(report, "LlamaRMSNorm")[1].problem_dir) / "extract.json").read_text())
    assert meta["paths"] == ["layers.0.input_layernorm", "layers.0.post_attention_layernorm",
                             "layers.1.input_layernorm", "layers.1.post_attention_layernorm", "norm"]


@pytest.mark.slow
def test_llama_rmsnorm_by_hand(llama):
    report, _ = llama
    prob, _ = _problem(report, "LlamaRMSNorm")
    d = prob.definition
    assert list(d.inputs) == ["hidden_states", "weight"]
    assert d.inputs["hidden_states"].shape == ["batch_size", "seq_len", "hidden_size"]
    assert d.inputs["weight"].shape == ["hidden_size"] and d.axes["hidden_size"].value == 64
    assert d.input_roles == {"weight": "uniform:0.5:1.5"}
    assert "transformers" not in d.reference and "import torch" in d.reference
    src = d.reference.replace("import math", "").replace("import torch", "")
    assert "import" not in src
    # LlamaRMSNorm: w * (x * rsqrt(mean(x^2, -1) + eps)), eps = rms_norm_eps = 1e-5
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 11, 64, generator=g)
    w = torch.rand(64, generator=g) + 0.5
    ms = (x * x).sum(-1, keepdim=True) / 64
    want = w * (x / torch.sqrt(ms + 1e-5))
    got = prob.make_reference("cpu")(x, w)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    wl = [w.axes for w in prob.workloads]
    assert wl[0] == {"batch_size": 2, "seq_len": 5} and wl[1] == {"batch_size": 4, "seq_len": 256}
    assert {"batch_size": 1, "seq_len": 256} in wl and {"batch_size": 4, "seq_len": 512} in wl
    assert prob.workloads[1].tolerance.max_atol == 1e-4


@pytest.mark.slow
def test_llama_mlp_by_hand(llama):
    report, _ = llama
    prob, _ = _problem(report, "LlamaMLP")
    d = prob.definition
    assert list(d.inputs) == ["x", "gate_proj_weight", "up_proj_weight", "down_proj_weight"]
    assert d.inputs["gate_proj_weight"].shape == ["intermediate_size", "hidden_size"]
    # LlamaMLP: down_proj(silu(gate_proj(x)) * up_proj(x)), silu(z) = z / (1 + exp(-z))
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 9, 64, dtype=torch.float64, generator=g)
    wg, wu = torch.randn(128, 64, dtype=torch.float64, generator=g), torch.randn(128, 64, dtype=torch.float64, generator=g)
    wd = torch.randn(64, 128, dtype=torch.float64, generator=g)
    a = x @ wg.T
    want = ((a / (1 + torch.exp(-a))) * (x @ wu.T)) @ wd.T
    got = prob.make_reference("cpu")(x, wg, wu, wd)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_llama_backward_matches_autograd_of_hand_formula(llama):
    report, _ = llama
    prob, _ = _problem(report, "LlamaRMSNorm", backward=True)
    d = prob.definition
    assert list(d.inputs) == ["hidden_states", "weight", "grad_output"]
    assert list(d.outputs) == ["grad_hidden_states", "grad_weight"]
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 64, dtype=torch.float64, generator=g)
    w = torch.rand(64, dtype=torch.float64, generator=g) + 0.5
    go = torch.randn(2, 3, 64, dtype=torch.float64, generator=g)
    # by hand: y = w * x * r, r = (mean(x^2) + eps)^-1/2
    r = ((x * x).mean(-1, keepdim=True) + 1e-5).rsqrt()
    gw = (go * x * r).sum((0, 1))
    gxn = go * w
    gx = r * gxn - x * r ** 3 * (gxn * x).mean(-1, keepdim=True)
    got_x, got_w = prob.make_reference("cpu")(x, w, go)
    torch.testing.assert_close(got_x, gx, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got_w, gw, rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_vit_regions(tmp_path):
    report = extract(load_source("hf:vit", VIT, batch=8), tmp_path / "p")
    s = _summary(report)
    assert s[("norm", "LayerNorm")] == ("written", 5)  # 2 per layer + the final one
    assert s[("attention", "ViTAttention")] == ("written", 2)
    assert s[("mlp", "ViTMLP")] == ("written", 2)
    assert s[("block", "ViTLayer")] == ("written", 2)
    assert s[("embedding", "ViTEmbeddings")][0] == "written"
    prob, _ = _problem(report, "ViTAttention")
    # the sequence (17 = 16 patches + CLS) is fixed by the image size: only the batch varies
    assert prob.definition.var_axes() == ["batch_size"]
    assert prob.definition.inputs["hidden_states"].shape[:2] == ["batch_size", 17]
    # probe 2, real 8, then 8 x 1/4 (= the probe, not repeated), 8 x 1/2, 8 x 2
    assert [w.axes["batch_size"] for w in prob.workloads] == [2, 8, 4, 16]
    _run_eager_and_sol(tmp_path / "p", tmp_path)


@pytest.mark.slow
def test_mixtral_moe_regions(tmp_path):
    report = extract(load_source("hf:mixtral", MIXTRAL, batch=2, seq=64), tmp_path / "p",
                     kinds={"moe", "routing", "experts"})
    s = _summary(report)
    assert s == {("moe", "MixtralSparseMoeBlock"): ("written", 2),
                 ("routing", "MixtralTopKRouter"): ("written", 2),
                 ("experts", "MixtralExperts"): ("written", 2)}
    prob, _ = _problem(report, "MixtralExperts")
    d = prob.definition
    # routed tokens: the experts see the flattened batch x sequence
    assert d.inputs["hidden_states"].shape[0] == "num_tokens"
    assert d.input_roles["top_k_index"].startswith("index:")
    axis = d.input_roles["top_k_index"][len("index:"):]
    assert d.axes[axis].value == 4
    assert prob.workloads[1].axes == {"num_tokens": 128}
    _run_eager_and_sol(tmp_path / "p", tmp_path)


@pytest.mark.slow
def test_dlrm_regions(tmp_path):
    report = extract(load_source("dlrm-kaggle"), tmp_path / "p")
    bags = [r for r in report.results if r.cls == "EmbeddingBag"]
    # 26 tables; tiny caps rows at 1000: the 15 Criteo Kaggle tables with >= 1000 rows (1460,
    # 10131227, 2202608, 12517, 93145, 5683, 8351593, 3194, 14992, 5461306, 5652, 2173, 7046547,
    # 286181, 142572) are one problem, the other 11 have distinct row counts
    assert all(r.status == "written" for r in bags)
    assert sum(r.count for r in bags) == 26
    assert sorted(r.count for r in bags) == [1] * 11 + [15]
    mlps = {r.cls: r for r in report.results if r.kind == "mlp"}
    assert mlps["Sequential"].status == "written" and mlps["LinearReLU"].status == "written"
    prob, _ = _problem(report, "EmbeddingBag")
    assert prob.definition.custom_inputs_entrypoint == "make_inputs"
    _run_eager_and_sol(tmp_path / "p", tmp_path)


def test_failing_regions_are_reported_not_written(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    report = extract(load_source("factories:hostile"), tmp_path)
    by_cls = {r.cls: r for r in report.results}
    assert by_cls["DataDependentBlock"].status == "failed"
    assert "torch.export failed" in by_cls["DataDependentBlock"].reason
    assert by_cls["RunningNormBlock"].status == "failed"
    assert "mutates module state" in by_cls["RunningNormBlock"].reason
    assert by_cls["NoisyBlock"].status == "failed"
    assert "not deterministic" in by_cls["NoisyBlock"].reason
    assert by_cls["ExportSensitiveBlock"].status == "failed"
    assert by_cls["ExportSensitiveBlock"].reason.startswith("reproduces:")
    assert by_cls["TinyBlock"].status == "failed"
    assert by_cls["TinyBlock"].reason.startswith("screen: degenerate")
    assert by_cls["LayerNorm"].status == "written"
    dirs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert dirs == [by_cls["LayerNorm"].name]
    rep = json.loads((tmp_path / "extract_report.json").read_text())
    assert {r["class"]: r["status"] for r in rep["results"]}["NoisyBlock"] == "failed"


def _sb(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "solbench.cli", *args], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def _run_eager_and_sol(problems: Path, tmp: Path) -> None:
    """`solbench baseline --eager`, `solbench run` on the CPU workloads and `solbench sol` over
    every problem directory in ``problems``: every trace PASSED, every workload bounded."""
    names = sorted(p.name for p in problems.iterdir() if p.is_dir())
    sols, res = tmp / "sols", tmp / "results.jsonl"
    _sb("baseline", *[str(problems / n) for n in names], "--eager", "-o", str(sols))
    _sb("run", str(problems), "--solutions", str(sols), "--device", "cpu", "--tag", "cpu", "-o", str(res),
        "--iters", "3", "--json")
    traces = [json.loads(line) for line in res.read_text().splitlines() if line.strip()]
    assert {t["definition"] for t in traces} == set(names)
    assert all(t["evaluation"]["status"] == "PASSED" for t in traces), \
        [(t["definition"], t["evaluation"]["status"]) for t in traces]
    rows = [json.loads(line) for line in _sb("sol", str(problems), "--json").stdout.splitlines() if line.strip()]
    assert len(rows) == len(names)
    assert all(w["sol_ms"] and w["sol_ms"] > 0 for row in rows for w in row["workloads"])


@pytest.mark.slow
def test_cli_extract_then_run_eager_and_sol(tmp_path):
    out = tmp_path / "problems"
    cfg = ",".join(f"{k}={v}" for k, v in LLAMA.items())
    _sb("extract", "hf:llama", "--config", cfg, "--batch", "2", "--seq", "64", "--kinds", "norm,mlp,rotary",
        "-o", str(out), "--json")
    names = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert names == ["001_mlp_llama_mlp", "002_norm_llama_rms_norm", "003_rotary_llama_rotary_embedding"]
    _run_eager_and_sol(out, tmp_path)


def test_cli_bad_input_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from solbench.cli import app

    r = CliRunner().invoke(app, ["extract", "hf:llama", "--kinds", "attention,bogus", "-o", str(tmp_path)])
    assert r.exit_code == 2 and "unknown kinds ['bogus']" in r.output
    r = CliRunner().invoke(app, ["extract", "hf:no_such_arch", "-o", str(tmp_path)])
    assert r.exit_code == 2 and "hf:no_such_arch" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["extract", "hf:llama", "--config", "hidden_size", "-o", str(tmp_path)])
    assert r.exit_code == 2 and "not key=value" in r.output
    assert not any(tmp_path.iterdir())
