"""cuTile: Python tile kernels (``import cuda.tile as ct``, ``@ct.kernel``, ``ct.launch``) from
the ``cuda-tile`` wheel (solbench extra ``cutile``). Its kernels are compiled by ``tileiras``
(CUDA 13.1+; ``cuda-tile[tileiras]``), which targets Blackwell (sm_100 and newer) and, from
13.2, Ampere/Ada (sm_8x), but not Hopper (cuda-tile 1.7's own README: "Hopper GPU will be
supported in the coming versions"). On an H200 (sm_90) the build step records COMPILE_ERROR
"unsupported on this GPU" before anything is imported."""

from .base import CUDA_JIT_TOOLS, AuditRules, Language, Requirement
from .cute_dsl import DRIVER_STREAM_CALLS

_FLOATS = {"float16": "float16", "bfloat16": "bfloat16", "tfloat32": "tf32",
           "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}

def _gpu_rule(sm: int) -> str | None:
    if sm >= 100 or 80 <= sm < 90:
        return None
    return "needs sm_100+ or sm_8x; not Hopper"


LANGUAGE = Language(
    name="cutile",
    family="python",
    title="cuTile",
    requirements=(Requirement("cuTile", module="cuda.tile", dist="cuda-tile", extra="cutile"),),
    extra="cutile",
    needs_cuda=True,
    gpu_rule=_gpu_rule,
    child_tools=CUDA_JIT_TOOLS | {"tileiras"},
    audit=AuditRules(
        dtype_names={f"cuda.tile.{k}": v for k, v in _FLOATS.items()},
        cast_methods=frozenset({"astype"}),
        python_calls={"audit.side_stream": DRIVER_STREAM_CALLS},
    ),
)
