"""An agent command for `solbench generate --agent-cmd` (bench/study_gpu.sh): writes the bundled
hand-written Triton solution of an l1 problem (suites/solutions/l1/<problem>/triton.json) as
the candidate, so the study loop (generate -> run -> verify -> report -> export) runs on a GPU
with real kernels and no model. Exits 3 for a problem without a bundled solution (recorded as
AGENT_ERROR)."""

import json
import sys
from pathlib import Path

from solbench.suites import DATA_ROOT

problem, solution = Path(sys.argv[1]), Path(sys.argv[2])
src = DATA_ROOT.parent / "solutions" / "l1" / problem.name / "triton.json"
if not src.is_file():
    print(f"no bundled Triton solution for {problem.name}", file=sys.stderr)
    sys.exit(3)
sol = json.loads(src.read_text())
solution.with_suffix(".json").write_text(json.dumps(sol, indent=1))
