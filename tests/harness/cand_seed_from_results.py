"""Hostile (CPU, issue 30 item 2, the seed): answers every call from a table of the inputs
solbench will generate. It finds the solbench process that runs it (a command line with
``-o``), reads the run's results file and takes the ``input_seed`` of the traces already
written; with it (or with ``$SOLBENCH_TEST_SEED_HINT``, the tests' control that the table
itself is right) it rebuilds every input set of every workload with solbench's own seed
derivation and generator, and answers from the table: zeros on a miss, no computation. It
needs the unsandboxed worker (or a sandbox that shows it the results file) to find the
file; the seed recorded under ``--seed`` must be useless to it during the run."""
import glob
import json
import os

import torch

from solbench.inputs.seeds import derived_seed
from solbench.inputs import make_inputs
from solbench.spec import load_problem

_SETS = [(r, "upstream") for r in list(range(8)) + list(range(1001, 1001 + 80))]
_SETS += [(500, "strict"), (501, "stress"), (502, "stress_sparse"), (503, "stress_sparse")]
_TABLE = {}
_TRIED = set()


def _solbench_run():
    """(results path, problem path) of the `solbench eval ... -o FILE` that runs us."""
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{d}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
            cwd = os.readlink(f"{d}/cwd")
        except OSError:
            continue
        if "eval" in argv and "-o" in argv[:-1]:
            i = argv.index("eval")
            return os.path.join(cwd, argv[argv.index("-o") + 1]), os.path.join(cwd, argv[i + 1])
    return None, None


def _base_seeds(results):
    out = []
    hint = os.environ.get("SOLBENCH_TEST_SEED_HINT")
    if hint:
        out.append(int(hint, 16))
    try:
        with open(results) as f:
            for line in f:
                s = json.loads(line).get("evaluation", {}).get("input_seed")
                try:
                    out.append(int(s, 16))
                except (TypeError, ValueError):
                    pass
    except (OSError, ValueError):
        pass
    return out


def _build(problem_path, base):
    p = load_problem(problem_path)
    ref = p.make_reference("cpu")
    for j, w in enumerate(p.workloads):
        for r, profile in _SETS:
            x = make_inputs(p, w, derived_seed(base, j, r), "cpu", profile=profile)["x"]
            _TABLE[x.reshape(-1)[:8].numpy().tobytes()] = ref(x)


def run(x):
    results, problem = _solbench_run()
    if problem is not None:
        for base in _base_seeds(results):
            if base not in _TRIED:
                _TRIED.add(base)
                _build(problem, base)
    hit = _TABLE.get(x.reshape(-1)[:8].cpu().numpy().tobytes())
    return hit.to(x.device).clone() if hit is not None else torch.zeros_like(x)
