"""``solbench demo``: a real problem suite slice with real candidates through the hardened
harness, CUDA when present (eager reference, torch.compile baseline, hand-written Triton),
else CPU (eager reference, an honest PyTorch rewrite, and three hostile candidates the harness
must catch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..spec import Problem, Solution, load_problem, load_solution, reference_solution
from ..suites import suite_problems

HERE = Path(__file__).resolve().parent
SOLUTIONS = HERE.parent / "suites" / "solutions"


#: the statuses that count as catching each hostile demo candidate (a crash or a build
#: failure is not a catch: the hostile must be stopped by the check meant for it)
CAUGHT_BY = {
    "softmax_uniform.py": ("INCORRECT_NUMERICAL",),
    "softmax_replay.py": ("INCORRECT_NUMERICAL", "REWARD_HACK"),
    "softmax_timer_patch.py": ("REWARD_HACK",),
}


@dataclass
class DemoJob:
    problem: Problem
    solution: Solution
    expect: str  # "PASSED" or "caught"
    workloads: list[str]
    caught_by: tuple[str, ...] = ()  # for "caught": the statuses that count as caught

    def as_expected(self, statuses: list[str]) -> bool:
        """Every workload PASSED (expect PASSED), or every workload ended in one of
        ``caught_by`` (expect caught)."""
        if not statuses:
            return False
        if self.expect == "PASSED":
            return all(s == "PASSED" for s in statuses)
        return all(s in self.caught_by for s in statuses)


def _problem(suite: str, name: str) -> Problem:
    for p in suite_problems(suite):
        if p.name == name:
            return load_problem(p)
    raise FileNotFoundError(f"bundled problem {suite}/{name} is missing")


def demo_jobs(device: str) -> list[DemoJob]:
    """The demo's (problem, candidate, expected verdict, workloads) list for ``device``.

    One workload per pair (on CUDA the first non-CPU one, else the first ``cpu``-tagged one).
    A problem's pairs are consecutive, so its reference worker is started once and kept
    between its candidates (the suite runner's evaluator keeps it while the problem stays the
    same), and the hostile candidates come last: a candidate judged REWARD_HACK has its
    reference worker and the spare workers dropped, which then costs nothing. On CUDA:
    RMSNorm (reference, Triton, torch.compile), the embedding bag (reference, Triton),
    softmax (reference, Triton, the honest online rewrite, three hostiles); on the CPU the
    reference of each, the online rewrite and the three hostiles."""
    jobs: list[DemoJob] = []
    cuda = device.startswith("cuda")
    softmax = _problem("l1", "softmax_fp32")
    emb = _problem("dlrm", "dlrm01_embedding_bag_sum_fp32")
    rms = _problem("l1", "rms_norm_bf16")

    def wl(p: Problem) -> list[str]:
        if cuda:
            return [w.uuid for w in p.workloads if not (w.tags and "cpu" in w.tags)][:1]
        return [w.uuid for w in p.workloads if w.tags and "cpu" in w.tags][:1]

    for p in (rms, emb, softmax):
        jobs.append(DemoJob(p, reference_solution(p), "PASSED", wl(p)))
        if cuda:
            tri = SOLUTIONS / ("l1" if p is not emb else "dlrm") / p.name / "triton.json"
            if tri.exists():
                jobs.append(DemoJob(p, load_solution(tri, p), "PASSED", wl(p)))
            if p is rms:  # one torch.compile baseline: its compile is most of a pair's time
                from ..suites.baseline import compile_baseline

                jobs.append(DemoJob(p, compile_baseline(p), "PASSED", wl(p)))
    jobs.append(DemoJob(softmax, load_solution(HERE / "softmax_online.py", softmax), "PASSED", wl(softmax)))
    for hostile, statuses in CAUGHT_BY.items():
        jobs.append(DemoJob(softmax, load_solution(HERE / hostile, softmax), "caught", wl(softmax),
                            statuses))
    return jobs
