"""Hostile (output caching, KernelBench format): the first forward's output is kept on the
module and returned for every later input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._out = None

    def forward(self, x):
        if self._out is None:
            self._out = torch.relu(self.linear(x))
        return self._out
