"""Honest: imports pydantic and defines (and validates) its own BaseModel at import, a config
object of the kind many real kernels carry. Must PASS, not be flagged."""
import math

import pydantic
import torch


class KernelConfig(pydantic.BaseModel):
    block: int = 128
    name: str = "gelu"

    @pydantic.field_validator("block")
    @classmethod
    def _pow2(cls, v):
        assert v & (v - 1) == 0
        return v

    def model_post_init(self, ctx):
        object.__setattr__(self, "_ready", True)


CFG = KernelConfig.model_validate({"block": 256})


@torch.no_grad()
def run(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x))) if CFG.block else x
