"""A warm `solbench sol` (every workload's count in the cache) prices the cached counts
without importing torch: the same rows as the run that counted them, in a process where any
import of torch fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.sol.test_cli_jobs import _problem

SRC = Path(__file__).resolve().parents[2] / "src"

#: imported at start-up by every Python process on the path it is put on (the CLI and any
#: counting child it starts): importing torch raises there
_REFUSE_TORCH = ("import sys\n"
                 "class _Refuse:\n"
                 "    def find_spec(self, name, path=None, target=None):\n"
                 "        if name == 'torch' or name.startswith('torch.'):\n"
                 "            raise ImportError('torch refused in this process')\n"
                 "sys.meta_path.insert(0, _Refuse())\n")


def _sol(args: list[str], *, no_torch: bool, home: Path) -> subprocess.CompletedProcess:
    path = [str(SRC)]
    if no_torch:
        site = home / "refuse-torch"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(_REFUSE_TORCH)
        path.insert(0, str(site))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), XDG_CACHE_HOME=str(home / "cache"), HOME=str(home))
    env.pop("SOLBENCH_SOL_CACHE", None)
    return subprocess.run([sys.executable, "-m", "solbench.cli", "sol", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_warm_sol_reads_the_cache_without_torch(tmp_path):
    a = _problem(tmp_path, "a", 1.0)
    b = _problem(tmp_path, "b", 2.0, ns=(8,))
    cache = tmp_path / "counts"
    args = [str(a), str(b), "--json", "--cache", str(cache), "--hardware", "H100_SXM"]
    refused = _sol(args, no_torch=True, home=tmp_path)
    # nothing cached yet: each workload must be counted, which needs torch (refused here: no bound)
    assert refused.returncode == 1, refused.stderr
    assert "have no bound" in refused.stderr
    cold = _sol(args, no_torch=False, home=tmp_path)
    assert cold.returncode == 0, cold.stderr
    warm = _sol(args, no_torch=True, home=tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout
    rows = [json.loads(x) for x in warm.stdout.splitlines()]
    # hand-worked: N fp32 read + N written = 8N bytes
    assert [w["bytes"]["fused"] for r in rows for w in r["workloads"]] == [8 * 64, 8 * 1024, 8 * 8]
