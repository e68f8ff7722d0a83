"""Input rules on the 59 SOL-ExecBench dev problems: which rule each input of a sample of
problems gets (the table below was checked by hand against each definition and upstream's
rules, docs/inputs.md), that every random input of every dev problem gets a known rule, and
that the reference is finite on the generated inputs of its smallest workload (upstream and
strict and stress profiles: 21 problems, all finite when measured) for the problems small
enough to run on the CPU."""

import math
import os
from pathlib import Path

import pytest
import torch

from solbench.inputs import RULES, InputRule, differing_profiles, input_rules, make_inputs
from solbench.spec import load_problem

DEV = Path(os.environ.get("SOLBENCH_DEV_DATASET") or
           Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "sol-execbench-dev")
needs_dev = pytest.mark.skipif(not DEV.is_dir(), reason=f"dev dataset not found at {DEV}")


def _problems():
    if not DEV.is_dir():
        return []
    return sorted(str(p.parent.relative_to(DEV)) for p in DEV.glob("*/*/definition.json"))


def _rules(name):
    prob = load_problem(DEV / name)
    w = min(prob.workloads, key=prob.workload_bytes)
    return prob, w, {k: (v.rule if isinstance(v, InputRule) else v) for k, v in input_rules(prob, w).items()}


#: hand-checked: every input of these definitions, by upstream's rules in upstream's order
HAND = {
    # "attention_mask" [b, 1, s, s] "Causal attention mask": the L1/015 case of issue 13
    "L2/007_multimodal_rotary_embedding_attention": {
        "hidden_states": "randn", "q_weight": "weight_fan_in", "q_bias": "randn",
        "k_weight": "weight_fan_in", "k_bias": "randn", "v_weight": "weight_fan_in",
        "v_bias": "randn", "o_weight": "weight_fan_in", "cos": "rope_cos", "sin": "rope_sin",
        "attention_mask": "causal_mask_additive"},
    # a bare 1-D "weight" is no norm weight upstream (randn); "rstd" is positive
    "L1/013_fused_residual_rms_norm_backward": {
        "grad_output": "randn", "x": "randn", "normalized": "randn", "rstd": "positive",
        "weight": "randn"},
    # [batch, seq] "attention_mask" is not square: upstream's binary-mask name list
    "L1/029_mamba_conv1d_with_gating": {
        "hidden_states": "randn", "attention_mask": "binary_mask", "in_proj_weight": "weight_fan_in",
        "in_proj_bias": "randn", "conv1d_weight": "weight_fan_in", "conv1d_bias": "randn"},
    # "layernorm_weight"/"layernorm_bias": prefix ends in "layernorm"; 4-D "grn_weight" is a
    # weight matrix by its suffix
    "L2/035_convnextv2_block_with_grn": {
        "x": "randn", "dwconv_weight": "weight_fan_in", "dwconv_bias": "randn",
        "layernorm_weight": "norm_weight_ones", "layernorm_bias": "norm_bias_zeros",
        "pwconv1_weight": "weight_fan_in", "pwconv1_bias": "randn", "grn_weight": "weight_fan_in",
        "grn_bias": "randn", "pwconv2_weight": "weight_fan_in", "pwconv2_bias": "randn",
        "eps": "scalar", "layer_norm_eps": "scalar"},
    # SSM decay "A" (upstream's name rule, U(-1, -0.001))
    "L2/043_mamba_chunk_scan_with_segsum": {
        "hidden_states": "randn", "A": "ssm_a", "B": "randn", "C": "randn", "D": "randn",
        "initial_states": "randn"},
    # int position ids keep upstream's [-1024, 1024); "q_norm_weight" and
    # "input_layernorm_weight" are norm weights; "inv_freq" is plain randn upstream
    "L2/059_decoder_layer_full_block": {
        "hidden_states": "randn", "position_ids": "int_uniform", "attention_mask": "causal_mask_additive",
        "input_layernorm_weight": "norm_weight_ones", "q_proj_weight": "weight_fan_in",
        "k_proj_weight": "weight_fan_in", "v_proj_weight": "weight_fan_in",
        "q_norm_weight": "norm_weight_ones", "k_norm_weight": "norm_weight_ones",
        "o_proj_weight": "weight_fan_in", "post_attention_layernorm_weight": "norm_weight_ones",
        "gate_proj_weight": "weight_fan_in", "up_proj_weight": "weight_fan_in",
        "down_proj_weight": "weight_fan_in", "inv_freq": "randn", "rms_norm_eps": "scalar",
        "attention_scale": "scalar"},
    # "attn_weights" is a softmax output; fp8 and safetensors inputs
    "L2/003_grouped_query_attention_with_rope_backward": {
        "grad_output": "randn", "hidden_states": "randn", "cos": "rope_cos", "sin": "rope_sin",
        "q_weight": "weight_fan_in", "k_weight": "weight_fan_in", "v_weight": "weight_fan_in",
        "o_weight": "weight_fan_in", "query_states": "randn", "key_states": "randn",
        "value_states": "randn", "attn_weights": "softmax_rows", "attn_output": "randn",
        "scaling": "scalar"},
    "FlashInfer-Bench/020_moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": {
        "routing_logits": "safetensors", "routing_bias": "safetensors",
        "hidden_states": "fp8_randn_clamped", "hidden_states_scale": "randn",
        "gemm1_weights": "fp8_randn_clamped", "gemm1_weights_scale": "randn",
        "gemm2_weights": "fp8_randn_clamped", "gemm2_weights_scale": "randn",
        "local_expert_offset": "scalar", "routed_scaling_factor": "scalar"},
    # GEMM operand "A" falls under upstream's SSM name rule (a quirk kept for compatibility)
    "FlashInfer-Bench/004_gemm_n128_k2048": {"A": "ssm_a", "B": "randn"},
    "L1/009_expert_token_scatter_with_weighted_forward_backward": dict.fromkeys(
        ["grad_output", "token_indices", "selected_tokens", "w1_output", "gate_output", "up_output",
         "gated_output", "expert_output", "selected_weights", "w1_weight", "w2_weight", "w3_weight"],
        "custom"),
}


@needs_dev
@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_checked_rules(name):
    _, _, got = _rules(name)
    assert got == HAND[name]


@needs_dev
def test_every_dev_input_gets_a_known_rule():
    names = _problems()
    assert len(names) == 59
    seen = set()
    for name in names:
        _, _, got = _rules(name)
        for k, r in got.items():
            assert r in RULES or r in ("scalar", "random_scalar", "safetensors", "custom"), (name, k, r)
            seen.add(r)
    # the dev set exercises these upstream rules
    assert {"causal_mask_additive", "binary_mask", "rope_cos", "rope_sin", "positive", "ssm_a",
            "softmax_rows", "weight_fan_in", "norm_weight_ones", "norm_bias_zeros",
            "fp8_randn_clamped", "int_uniform"} <= seen


@needs_dev
def test_causal_mask_values_on_the_gqa_problem():
    prob, w, _ = _rules("L2/007_multimodal_rotary_embedding_attention")
    x = make_inputs(prob, w, seed=1)
    m = x["attention_mask"]
    s = m.shape[-1]
    lower = torch.tril(torch.ones(s, s, dtype=torch.bool))
    assert bool((m[..., lower] == 0).all())
    assert bool((m[..., ~lower] == torch.finfo(torch.bfloat16).min).all())
    # the strict profile gives no -inf here: the description does not say -inf
    assert bool((make_inputs(prob, w, seed=1, profile="strict")["attention_mask"] == m).all())
    cos, sin = x["cos"].float(), x["sin"].float()
    # cosines and sines of the same kind of angles: in [-1, 1], cos of angles in [-pi, pi]
    assert cos.abs().max() <= 1.0 and sin.abs().max() <= 1.0 and cos.min() >= -1.0


@needs_dev
def test_differing_profiles_on_dev():
    prob, w, _ = _rules("L2/035_convnextv2_block_with_grn")
    assert differing_profiles(prob, w) == ("strict", "stress", "stress_sparse")
    prob, w, _ = _rules("L1/025_video_latent_gelu_activation")
    assert differing_profiles(prob, w) == ("stress", "stress_sparse")
    prob, w, _ = _rules("L1/009_expert_token_scatter_with_weighted_forward_backward")
    assert differing_profiles(prob, w) == ()


#: inputs of at most this many bytes (smallest workload) are run through the reference here
MAX_BYTES = 40 << 20


def _finite(v):
    if isinstance(v, (tuple, list)):
        return all(_finite(t) for t in v)
    if isinstance(v, torch.Tensor):
        return v.numel() == 0 or not v.dtype.is_floating_point or bool(torch.isfinite(v.float()).all())
    return not isinstance(v, float) or math.isfinite(v)


def _random_small():
    out = []
    for name in _problems():
        prob = load_problem(DEV / name)
        w = min(prob.workloads, key=prob.workload_bytes)
        kinds = set(input_rules(prob, w).values())
        if prob.workload_bytes(w) <= MAX_BYTES and "safetensors" not in kinds and "custom" not in kinds:
            out.append(name)
    return out


@needs_dev
@pytest.mark.slow
@pytest.mark.parametrize("profile", ["upstream", "strict", "stress", "stress_sparse"])
def test_reference_finite_on_generated_inputs(profile):
    names = _random_small()
    assert len(names) >= 20
    bad = []
    for name in names:
        prob = load_problem(DEV / name)
        w = min(prob.workloads, key=prob.workload_bytes)
        x = make_inputs(prob, w, seed=7, profile=profile)
        with torch.no_grad():
            out = prob.reference_module().run(**x)
        if not _finite(out):
            bad.append(name)
    assert bad == []
