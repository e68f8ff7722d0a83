"""The parent's warm-up (harness/warmup.py): on CUDA it launches the parent's input generation
and output comparison with throwaway values while the first worker starts. Here, on the CPU:
it does nothing there, it runs the real functions without error on every dtype the dev set
declares (a warm-up that raised would only leave the loading to the first workload, so an
error is a silent loss: every dev problem is tried), it stays within its time bound, and it
leaves no trace of itself in an evaluation's inputs."""

import glob
import os
from pathlib import Path

import pytest
import torch

from solbench.harness import warmup
from solbench.inputs.generate import make_inputs
from solbench.spec.problem import load_problem

from harness_helpers import matmul_problem

DEV = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "sol-execbench-dev"


def test_nothing_runs_on_the_cpu(tmp_path):
    p = matmul_problem(tmp_path, (64,))
    w = warmup.ParentWarmup(p, p.workloads[0], "cpu")
    assert w._thread is None and w.join() is None


@pytest.mark.skipif(not DEV.is_dir(), reason="../shared/datasets/sol-execbench-dev absent")
def test_every_dev_problem_warms_without_error():
    errs, slow = [], []
    for d in sorted(glob.glob(str(DEV / "*" / "*"))):
        if not os.path.isdir(d):
            continue
        p = load_problem(d)
        r = warmup.warm_parent(p, p.workloads[0], "cpu")
        # a workload whose inputs are a FlashInfer blob absent here fails its generation (the
        # rounds say so); its comparison is still warmed
        e = [x for x in (r["error"] or "").split("; ") if x and "MissingBlobError" not in x]
        if e:
            errs.append((Path(d).name, e))
        if r["seconds"] > 3 * (warmup.MAX_GENERATE_S + 1.0):
            slow.append((Path(d).name, r["seconds"]))
    assert not errs, errs
    assert not slow, slow


def test_the_warm_up_leaves_the_evaluations_inputs_unchanged(tmp_path):
    """Its seed is its own, and every input set seeds its generators itself: a set made after
    the warm-up holds the same bits as one made without it."""
    p = matmul_problem(tmp_path, (64,))
    w = p.workloads[0]
    before = make_inputs(p, w, 1234, "cpu")
    assert warmup.warm_parent(p, w, "cpu")["error"] is None
    after = make_inputs(p, w, 1234, "cpu")
    assert before.keys() == after.keys()
    for k in before:
        assert torch.equal(before[k], after[k]), k


def test_a_first_workload_above_the_bound_is_warmed_by_the_smallest_under_it(tmp_path, monkeypatch):
    """CUDA loads a kernel at its first launch whatever the sizes, so a first workload too big
    to generate beside a starting worker is warmed by the problem's smallest one under the
    bound (same definition, same kernels), and by none when every workload is above it."""
    p = matmul_problem(tmp_path, (512, 32, 64))  # 3 n^2 float32: 3 MiB, 12 KiB, 48 KiB
    big, small, mid = p.workloads
    assert p.workload_bytes(big) == 3 * 512 * 512 * 4 and p.workload_bytes(small) == 3 * 32 * 32 * 4
    made = []
    from solbench.inputs import rounds
    real = rounds.round_plan

    def plan(n, problem=None, workload=None, extra=True):  # _generate imports it when called
        made.append(workload.uuid)
        return real(n, problem, workload, extra)

    monkeypatch.setattr(rounds, "round_plan", plan)
    monkeypatch.setattr(warmup, "MAX_SET_BYTES", 1 << 20)
    assert warmup.warm_parent(p, big, "cpu")["error"] is None and made == ["w32"]
    made.clear()
    assert warmup.warm_parent(p, mid, "cpu")["error"] is None and made == ["w64"]  # itself
    made.clear()
    monkeypatch.setattr(warmup, "MAX_SET_BYTES", 1024)  # every workload above it
    assert warmup.warm_parent(p, big, "cpu")["error"] is None and made == []
