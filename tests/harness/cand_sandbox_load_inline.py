"""Honest (CPU): a C++ extension built with torch.utils.cpp_extension.load_inline at import
(ninja and g++ write into TORCH_EXTENSIONS_DIR: the sandbox's private scratch)."""
import torch
from torch.utils.cpp_extension import load_inline

_SRC = """
#include <torch/extension.h>
torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }
"""
_ext = load_inline(name="solbench_sandbox_mm", cpp_sources=[_SRC], functions=["mm"], verbose=False)


def run(a, b):
    return _ext.mm(a, b)
