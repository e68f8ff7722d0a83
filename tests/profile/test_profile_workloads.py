"""Every workload builds and runs a step at tiny scale on CPU; the plain-torch models and the
Llama configs match published parameter counts."""

from __future__ import annotations

import pytest
import torch

from solbench.profile import models
from solbench.profile.workloads import (CRITEO_KAGGLE_ROWS, MLPERF_V2_POOLING, MLPERF_V2_ROWS, WORKLOADS,
                                        ProfileError, build_workload)

CASES = [(n, m) for n, s in WORKLOADS.items() for m in s.modes]
NEEDS_TRANSFORMERS = {"llama-135m", "llama-1b", "llama-8b", "bert-base"}


def _has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_seven_workloads_three_domains():
    domains = {s.domain for s in WORKLOADS.values()}
    assert domains == {"language", "vision", "recommendation"}
    assert len(WORKLOADS) == 10  # 7 workloads: Llama x3 widths, DLRM x2 configs
    assert set(WORKLOADS["llama-1b"].modes) == {"infer", "decode", "train"}


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_tiny_step_runs_on_cpu(name, mode):
    if name in NEEDS_TRANSFORMERS and not _has_transformers():
        pytest.skip("transformers not installed (pip install 'solbench[profile]')")
    w = build_workload(name, mode, "tiny", "cpu")
    params = [p for p in w.model.parameters()]
    before = [p.detach().clone() for p in params[:4]]
    w.step()
    w.step()
    assert w.config["parameters"] == sum(p.numel() for p in params) > 0
    assert w.precision["param_dtype"] == "float32" and w.precision["autocast_dtype"] is None
    if mode == "train":  # the optimizer really stepped: some parameter changed
        changed = any(not torch.equal(b, p.detach()) for b, p in zip(before, params[:4]))
        changed = changed or any(p.grad is not None for p in params)
        assert changed


def test_decode_keeps_context_fixed():
    if not _has_transformers():
        pytest.skip("transformers not installed")
    w = build_workload("llama-135m", "decode", "tiny", "cpu")
    for _ in range(3):
        w.step()
    assert w.config["context"] == 32


def test_bad_names_raise_profile_error():
    with pytest.raises(ProfileError, match="unknown workload"):
        build_workload("gpt-17", "infer", "tiny", "cpu")
    with pytest.raises(ProfileError, match="no mode 'decode'"):
        build_workload("resnet50", "decode", "tiny", "cpu")
    with pytest.raises(ProfileError, match="unknown scale"):
        build_workload("resnet50", "infer", "huge", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ProfileError, match="CUDA is not available"):
            build_workload("resnet50", "infer", "tiny", "cuda")


# ---- architectural faithfulness of the fallbacks, against published parameter counts
def test_resnet50_plain_matches_torchvision_count():
    with torch.device("meta"):
        m = models.ResNet50()
    assert sum(p.numel() for p in m.parameters()) == 25_557_032  # torchvision resnet50 docs


def test_vit_b16_plain_matches_published_count():
    with torch.device("meta"):
        m = models.VisionTransformer()
    assert sum(p.numel() for p in m.parameters()) == 86_567_656  # torchvision vit_b_16 / timm


def test_dit_xl2_block_count_by_hand():
    with torch.device("meta"):
        m = models.DiTBlock(1152, 16)
    d = 1152
    by_hand = (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + (d * 6 * d + 6 * d)
    assert by_hand == 23_905_152
    assert sum(p.numel() for p in m.parameters()) == by_hand


def test_dlrm_configs():
    assert sum(CRITEO_KAGGLE_ROWS) == 33_762_577  # Criteo Kaggle total (DLRM reference)
    assert len(MLPERF_V2_ROWS) == len(MLPERF_V2_POOLING) == 26
    with torch.device("meta"):
        m = models.DLRM(CRITEO_KAGGLE_ROWS, 16, (13, 512, 256, 64, 16), (512, 256, 1), interaction="dot")
    # top MLP input: D + F(F-1)/2 with F = 27 features (dense + 26 tables) = 16 + 351 = 367
    assert m.top[0].linear.in_features == 367
    emb = sum(r * 16 for r in CRITEO_KAGGLE_ROWS)
    mlp_bottom = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 64 + 64) + (64 * 16 + 16)
    mlp_top = (367 * 512 + 512) + (512 * 256 + 256) + (256 * 1 + 1)
    assert sum(p.numel() for p in m.parameters()) == emb + mlp_bottom + mlp_top


def test_dot_interaction_matches_reference_formula():
    torch.manual_seed(0)
    m = models.DLRM([10, 20, 30], 4, (13, 8, 4), (6, 1), interaction="dot", sparse=False)
    dense = torch.randn(5, 13)
    idx = [torch.randint(0, r, (5,)) for r in (10, 20, 30)]
    offs = [torch.arange(5) for _ in range(3)]
    x = m.bottom(dense)
    e = [t(i, o) for t, i, o in zip(m.emb.tables, idx, offs)]
    feats = [x] + e
    pairs = [(feats[i] * feats[j]).sum(1) for i in range(4) for j in range(i)]  # strictly lower triangle
    r = torch.cat([x, torch.stack(pairs, 1)], 1)
    torch.testing.assert_close(m(dense, idx, offs), m.top(r).squeeze(1))


def test_low_rank_cross_formula():
    torch.manual_seed(0)
    c = models.LowRankCross(6, 1, 2)
    x0 = torch.randn(3, 6)
    expect = x0 * (x0 @ c.V[0].weight.T @ c.U[0].weight.T + c.U[0].bias) + x0
    torch.testing.assert_close(c(x0), expect)


@pytest.mark.skipif(not _has_transformers(), reason="transformers not installed")
def test_llama_sizes_match_published():
    from solbench.profile.workloads import param_count_meta

    assert param_count_meta("llama-1b") == 1_235_814_400  # Llama-3.2-1B (tied embeddings)
    assert param_count_meta("llama-135m") == 134_515_008  # SmolLM-135M
    # 8 of Llama-3.1-8B's 32 layers: 218,112,000 per layer, embeddings 525,336,576 each, final norm
    assert param_count_meta("llama-8b") == 8 * 218_112_000 + 2 * 128256 * 4096 + 4096
