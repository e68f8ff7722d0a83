"""Workload profiler: what share of a real model's time could custom kernels reach?

- :mod:`.workloads`: seven workloads in three domains (Llama x3 widths, BERT-base, ViT-B/16,
  ResNet-50, DiT block, DLRM x2 configs, DCNv2), built offline with random weights.
- :mod:`.pipeline`: warm up, time unprofiled steps, profile with torch.profiler, classify,
  report busy/wall time and the addressable fraction (strict/loose, over busy/wall).
- :mod:`.classify`: ordered kernel-name rules with the aten-op fallback.
- :mod:`.amdahl`: problem -> replaced kernels map and the two end-to-end projections.
- :mod:`.figures`: stacked class bars, the Llama sweep figure.
"""

from .amdahl import (amdahl_time_saved, end_to_end_speedup, load_problem_map, project, study_projection)
from .classify import CLASSES, NATIVE_SUBCLASSES, Classification, classify_kernel, classify_op
from .pipeline import ProfileReport, fixture_rows, llama_sweep, profile, profile_workload
from .workloads import LLAMA_SWEEP, WORKLOADS, BuiltWorkload, ProfileError, build_workload

__all__ = [
    "CLASSES", "NATIVE_SUBCLASSES", "Classification", "classify_kernel", "classify_op", "ProfileReport",
    "profile", "profile_workload", "llama_sweep", "fixture_rows", "amdahl_time_saved", "end_to_end_speedup",
    "study_projection", "load_problem_map", "project", "LLAMA_SWEEP", "WORKLOADS", "BuiltWorkload",
    "ProfileError", "build_workload",
]
