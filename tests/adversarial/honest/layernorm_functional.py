"""Honest: torch's own layer norm (what the reference calls), with the weight and bias."""
import torch.nn.functional as F


def run(x, norm_weight, norm_bias):
    return F.layer_norm(x, (x.shape[-1],), norm_weight, norm_bias, 1e-5)
