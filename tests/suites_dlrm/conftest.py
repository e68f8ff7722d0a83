from pathlib import Path

import pytest
import torch

from solbench.spec import load_problem

DLRM_DIR = Path(__file__).resolve().parents[2] / "src" / "solbench" / "suites" / "data" / "dlrm"
PROBLEM_DIRS = sorted(p for p in DLRM_DIR.iterdir() if (p / "definition.json").exists())


def cpu_inputs(problem, workload, seed=0):
    """Inputs of a workload from the problem's own custom entry point (seeded)."""
    env = problem.definition.resolve_axes(workload.axes)
    fn = getattr(problem.reference_module(), problem.definition.custom_inputs_entrypoint)
    torch.manual_seed(seed)
    return env, fn(dict(env), torch.device("cpu"))


def run_reference(problem, inputs):
    out = problem.make_reference("cpu")(*[inputs[k] for k in problem.definition.inputs])
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.fixture(scope="session")
def problems():
    return {p.name: load_problem(p) for p in PROBLEM_DIRS}
