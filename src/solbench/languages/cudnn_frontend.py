"""cuDNN frontend (Python): graphs built with ``import cudnn`` (``cudnn.pygraph``) from the
``nvidia-cudnn-frontend`` wheel (solbench extra ``cudnn``)."""

from .base import AuditRules, Language, Requirement

LANGUAGE = Language(
    name="cudnn_frontend",
    family="python",
    title="cuDNN frontend",
    requirements=(Requirement("cuDNN frontend", module="cudnn", dist="nvidia-cudnn-frontend",
                              extra="cudnn"),),
    extra="cudnn",
    needs_cuda=True,
    audit=AuditRules(dtype_names={"cudnn.data_type.HALF": "float16",
                                  "cudnn.data_type.BFLOAT16": "bfloat16",
                                  "cudnn.data_type.FP8_E4M3": "float8_e4m3fn",
                                  "cudnn.data_type.FP8_E5M2": "float8_e5m2"}),
)
