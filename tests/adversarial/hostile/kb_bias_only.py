"""Hostile (parameter-only output, KernelBench format): ignores the input and returns
relu(bias) broadcast to the output shape."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear.bias).expand(x.shape[0], -1).contiguous()
