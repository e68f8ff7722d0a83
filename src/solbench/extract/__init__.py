"""Problems from the user's own model: ``solbench extract`` (docs/extract.md).

- :mod:`.sources`: the model (``hf:ARCH`` from its config, a profiler workload, ``module:factory``).
- :mod:`.capture`: regions (attention, MLP, norm, rotary, embedding, routing, experts, MoE,
  residual block) and their recorded calls at two probe sizes.
- :mod:`.codegen`: torch.export of a region -> a standalone functional reference (weights as inputs).
- :mod:`.pipeline`: roles, workloads, tolerances, the checks before writing, deduplication.
"""

from .capture import RULES, find_regions, region_kind
from .codegen import RegionError
from .pipeline import SWEEP, TOLERANCES, ExtractReport, RegionResult, check_problem, extract, tolerance_for
from .sources import PROBES, ExtractError, ModelSource, load_source, parse_config

__all__ = ["RULES", "find_regions", "region_kind", "RegionError", "SWEEP", "TOLERANCES", "ExtractReport",
           "RegionResult", "check_problem", "extract", "tolerance_for", "PROBES", "ExtractError", "ModelSource",
           "load_source", "parse_config"]
