"""Self-checks of the measurement (threats.md principle 8: both sides measured alike).

Three checks, each run through the real harness (:func:`solbench.harness.evaluate`):

- **A/A**: the reference evaluated as the candidate. Both sides run the same code on the
  same inputs, so the speedup must read 1.00 within the run's own stated noise: the
  speedup interval of :func:`solbench.report.tables.speedup_interval` (reference Q1 /
  candidate Q3 .. reference Q3 / candidate Q1) must hold 1.0.
- **Known difference**: the reference with a second pass of the same computation after the
  first (its outputs discarded). The candidate does twice the reference's work: a slowdown
  between :data:`KD_LOW` and :data:`KD_HIGH` (the expected 2.0 less the second pass's warm
  caches: it reads inputs the first pass just brought into the cache, the flush runs before
  the call only) must lie within the run's stated noise, as 1.0 must for the A/A; where the
  run resolves it (reference median >= :data:`MIN_MS` and a noise interval below 1) the
  reading itself must be a slowdown in that band.
- **Fresh vs reused worker**: the first workload of each problem is evaluated again at the
  end of the A/A run, in the worker that has by then run every other workload; its A/A
  speedup's noise interval must overlap the one of the fresh worker's run (each against the
  reference timed beside it, so a load that changed in between cancels out).

:func:`run_selftest` returns a :class:`SelfTestReport` (rows, per-suite A/A distribution
p5/p50/p95, the checks and the outcome: pass, fail, or inconclusive when a suite had no
workload whose A/A noise interval is within :data:`AA_MAX_WIDTH`, i.e. the host was too noisy
for the A/A to test anything; never a pass). ``solbench selftest`` prints it and exits 0 /
1 / 3 (:data:`EXIT_CODES`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from .spec.problem import Problem, reference_solution
from .spec.solution import Solution
from .spec.trace import Status, Trace, speedup_resolved

#: the known difference's slowdown must lie in [KD_LOW, KD_HIGH] where it is resolvable
KD_EXPECTED = 2.0
KD_LOW = 1.3
KD_HIGH = 2.6
#: reference median (ms) from which the known difference's size is checked, per device type
#: (below it only its sign: the harness's per-call floor dominates; on CUDA the 20 us of
#: the timing-fidelity goal)
MIN_MS = {"cpu": 0.2, "cuda": 0.02}
#: an A/A noise interval wider than this (hi / lo) tests nothing: the run is reported as too
#: noisy to be conclusive there (not a failure; a loaded CPU host reads 0.01-5x)
AA_MAX_WIDTH = 2.0
#: share of a suite's A/A workloads that must lie within noise (by chance alone a few of a
#: large suite fall outside their interquartile intervals; a bias moves them all)
AA_MIN_SHARE = 0.9


# ------------------------------------------------------------------ the built-in set
def _def(name: str, desc: str, axes: dict, inputs: dict, outputs: dict, ref: str) -> dict:
    return {"name": name, "description": desc, "axes": axes, "inputs": inputs,
            "outputs": outputs, "reference": ref}


#: a small set that runs on the CPU in a couple of minutes: an elementwise op at a size
#: below the harness's floor and one above it, a row softmax and a compute-bound matmul
BUILTIN: list[tuple[dict, list[dict]]] = [
    (_def("selftest_relu_f32", "ReLU over [rows, cols] (memory-bound)",
          {"rows": {"type": "var"}, "cols": {"type": "const", "value": 1024}},
          {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
          {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
          "import torch\n\ndef run(x):\n    return torch.relu(x)\n"),
     [{"uuid": "relu-8x1024", "axes": {"rows": 8}, "inputs": {"x": {"type": "random"}}},
      {"uuid": "relu-1024x1024", "axes": {"rows": 1024}, "inputs": {"x": {"type": "random"}}}]),
    (_def("selftest_softmax_f32", "softmax over the last dim of [rows, cols]",
          {"rows": {"type": "var"}, "cols": {"type": "const", "value": 2048}},
          {"x": {"shape": ["rows", "cols"], "dtype": "float32"}},
          {"y": {"shape": ["rows", "cols"], "dtype": "float32"}},
          "import torch\n\ndef run(x):\n    return torch.softmax(x, dim=-1)\n"),
     [{"uuid": "softmax-256x2048", "axes": {"rows": 256}, "inputs": {"x": {"type": "random"}}}]),
    (_def("selftest_matmul_f32", "C = A @ B, square (compute-bound)",
          {"n": {"type": "var"}},
          {"a": {"shape": ["n", "n"], "dtype": "float32"}, "b": {"shape": ["n", "n"], "dtype": "float32"}},
          {"c": {"shape": ["n", "n"], "dtype": "float32"}},
          "import torch\n\ndef run(a, b):\n    return a @ b\n"),
     [{"uuid": "matmul-256", "axes": {"n": 256},
       "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}]),
]


def write_builtin(root: Path) -> list[Path]:
    """Write the built-in problems (definition.json + workload.jsonl) under ``root``;
    returns their directories."""
    out = []
    for d, ws in BUILTIN:
        p = Path(root) / d["name"]
        p.mkdir(parents=True, exist_ok=True)
        (p / "definition.json").write_text(json.dumps(d, indent=1))
        (p / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in ws))
        out.append(p)
    return out


# ------------------------------------------------------------------ the candidates
KD_WRAPPER = '''

# solbench selftest: the known difference, a second pass of the same work (outputs discarded)
_solbench_selftest_once = run


def run(*args):
    out = _solbench_selftest_once(*args)
    _solbench_selftest_once(*args)
    return out
'''

KD_WRAPPER_KB = '''

# solbench selftest: the known difference, a second pass of the same work (outputs discarded)
class SolbenchSelftestTwice(Model):
    def forward(self, *args):
        out = super().forward(*args)
        super().forward(*args)
        return out
'''


def known_difference_solution(problem: Problem) -> Solution:
    """The reference plus a second pass of the same computation (non-DPS, like the
    reference): twice the reference's work, the first pass's outputs returned."""
    ref = reference_solution(problem)
    src = ref.sources[0].content
    entry = ref.spec.entry_point
    if problem.kind == "kernelbench":
        src, entry = src + KD_WRAPPER_KB, entry.split("::")[0] + "::SolbenchSelftestTwice"
    else:
        src = src + KD_WRAPPER
    data = json.loads(ref.model_dump_json())
    data["name"] = f"{problem.name}__twice"
    data["description"] = "the reference run twice per call (solbench selftest's known difference)"
    data["spec"]["entry_point"] = entry
    data["sources"][0]["content"] = src
    return Solution.model_validate(data)


# ------------------------------------------------------------------ statistics
def quantile(xs: list[float], p: float) -> float | None:
    """Quantile ``p`` of ``xs`` with linear interpolation (numpy's default); None if empty."""
    xs = sorted(x for x in xs if x is not None and math.isfinite(x))
    if not xs:
        return None
    pos = p * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Row:
    """One workload's results. Ratios are speedups (reference / candidate median);
    intervals the run's noise interval of a speedup (see module doc)."""

    suite: str
    problem: str
    workload: str
    aa_status: str
    aa_speedup: float | None = None
    aa_interval: tuple[float, float] | None = None
    aa_within_noise: bool = False
    #: the noise interval is narrow enough (hi / lo <= AA_MAX_WIDTH) for the A/A to test anything
    aa_conclusive: bool = False
    #: the A/A speedup resolved by the paired-block rule (``spec.trace.speedup_resolved``):
    #: True is a false claim (the same code read faster or slower); None: not judged
    aa_resolved: bool | None = None
    ref_ms: float | None = None
    kd_status: str | None = None
    kd_speedup: float | None = None
    kd_interval: tuple[float, float] | None = None
    kd_resolvable: bool = False
    kd_ok: bool = False
    fresh_ms: float | None = None
    reused_ms: float | None = None
    fresh_speedup: float | None = None
    reused_speedup: float | None = None
    agree: bool | None = None
    findings: list[str] = field(default_factory=list)


@dataclass
class SuiteSummary:
    suite: str
    n: int
    p5: float | None
    p50: float | None
    p95: float | None
    within_noise: int
    #: workloads whose A/A noise interval is narrow enough to test anything
    conclusive: int
    geomean_interval: tuple[float, float] | None
    aa_ok: bool
    kd_n: int
    kd_ok: int
    agree_n: int
    agree_ok: int
    #: "pass", "fail" (a check failed) or "inconclusive" (no check failed and no workload's
    #: A/A noise interval was narrow enough to test anything)
    result: str = "pass"


#: exit status of ``solbench selftest`` per outcome (2 stays the usage error's)
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 3}


@dataclass
class SelfTestReport:
    device: str
    iters: int
    rows: list[Row]
    suites: list[SuiteSummary]
    failures: list[str]
    #: suites whose A/A tested nothing (:func:`summarize`), with why
    inconclusive: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        """"fail" when a check failed; else "inconclusive" when some suite had no conclusive
        workload (its A/A tested nothing, so it is not a pass); else "pass"."""
        if self.failures:
            return "fail"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    def to_json(self) -> dict:
        return {"device": self.device, "iters": self.iters, "passed": self.passed,
                "outcome": self.outcome, "failures": self.failures,
                "inconclusive": self.inconclusive, "suites": [asdict(s) for s in self.suites],
                "rows": [asdict(r) for r in self.rows],
                "criteria": {"aa": f"speedup interval holds 1.0 on >= {AA_MIN_SHARE:.0%} of a suite's "
                                   "workloads and the geomean interval holds 1.0; conclusive where the "
                                   f"interval's hi / lo <= {AA_MAX_WIDTH}",
                             "known_difference": f"a slowdown in [{KD_LOW}, {KD_HIGH}] (expected {KD_EXPECTED}) "
                                                 "within the noise interval; the reading itself in that band "
                                                 f"where the reference median (ms) >= {MIN_MS} and the noise "
                                                 "interval lies below 1",
                             "fresh_vs_reused": "the A/A speedup noise intervals of the fresh and the "
                                                "reused worker's runs overlap"}}


def _interval(t: Trace) -> tuple[float, float] | None:
    from .report.tables import speedup_interval

    return speedup_interval(t)


def _speedup(t: Trace) -> float | None:
    p = t.evaluation.performance
    return p.speedup_factor if p is not None else None


# ------------------------------------------------------------------ the run
def run_selftest(problems: list[tuple[str, Problem, list]], cfg, *, known_difference: bool = True,
                 agreement: bool = True, progress: Callable[[str], None] | None = None) -> SelfTestReport:
    """Run the checks on ``problems``: (suite name, problem, workloads to use) each.

    ``cfg``: an :class:`solbench.harness.EvalConfig` (device, iterations, ...; its workload
    selection is replaced per problem). Returns the report; never raises for a check that
    fails (that is in ``failures``)."""
    from .harness import Evaluator

    rows: list[Row] = []
    failures: list[str] = []
    dev_type = "cuda" if cfg.is_cuda else "cpu"
    min_ms = MIN_MS[dev_type]
    for suite, prob, ws in problems:
        if not ws:
            continue
        uuids = [w.uuid for w in ws]
        say = progress or (lambda s: None)
        ev = Evaluator(prob, cfg)
        try:
            # A/A; the first workload once more at the end, in the reused worker
            ev.cfg = replace(cfg, workloads=uuids + ([uuids[0]] if agreement else []))
            say(f"{suite}/{prob.name}: A/A on {len(uuids)} workload(s)")
            aa = ev.evaluate(reference_solution(prob))
            kd: list[Trace] = []
            if known_difference:
                ev.cfg = replace(cfg, workloads=uuids)
                say(f"{suite}/{prob.name}: known difference (the reference twice per call)")
                kd = ev.evaluate(known_difference_solution(prob))
        finally:
            ev.close()
        for i, t in enumerate(aa[: len(uuids)]):
            st = t.evaluation.status
            r = Row(suite=suite, problem=prob.name, workload=t.workload.uuid, aa_status=st.value,
                    findings=sorted({f.check for f in t.evaluation.findings}))
            if st == Status.PASSED:
                r.aa_speedup = _speedup(t)
                r.aa_interval = _interval(t)
                r.aa_within_noise = r.aa_interval is not None and r.aa_interval[0] <= 1.0 <= r.aa_interval[1]
                r.aa_conclusive = r.aa_interval is not None and r.aa_interval[0] > 0 \
                    and r.aa_interval[1] / r.aa_interval[0] <= AA_MAX_WIDTH
                rt = t.evaluation.reference_timing
                r.ref_ms = rt.median_ms if rt is not None else None
                r.aa_resolved = speedup_resolved(t.evaluation)
            if i < len(kd):
                k = kd[i]
                r.kd_status = k.evaluation.status.value
                if k.evaluation.status == Status.PASSED:
                    r.kd_speedup = _speedup(k)
                    r.kd_interval = _interval(k)
                    krt = k.evaluation.reference_timing
                    kref = krt.median_ms if krt is not None else None
                    # the known truth (a slowdown in the band) must lie within the run's
                    # stated noise, as 1.0 must for the A/A; where the run resolves it (a
                    # reference above the per-call floor, a noise interval below 1) the
                    # reading itself must be a slowdown in the band
                    iv = r.kd_interval
                    consistent = iv is not None and iv[0] <= 1.0 / KD_LOW and iv[1] >= 1.0 / KD_HIGH
                    r.kd_resolvable = kref is not None and kref >= min_ms and iv is not None and iv[1] < 1.0
                    sized = (not r.kd_resolvable) or (
                        r.kd_speedup is not None and r.kd_speedup > 0 and KD_LOW <= 1.0 / r.kd_speedup <= KD_HIGH)
                    r.kd_ok = consistent and sized
                if not r.kd_ok:
                    failures.append(f"known difference {prob.name}/{r.workload}: "
                                    + (f"status {r.kd_status}" if r.kd_speedup is None else
                                       f"slowdown {1 / r.kd_speedup:.3g}x, interval "
                                       f"{_fmt_iv(r.kd_interval, inv=True)}"
                                       + f", expected {KD_LOW}-{KD_HIGH}x"))
            if i == 0 and agreement and len(aa) > len(uuids):
                # each run's speedup against the reference timed beside it (interleaved
                # blocks): a load that changed between the two runs cancels out
                fresh, reused = aa[0], aa[-1]
                ia, ib = _interval(fresh), _interval(reused)
                if fresh.evaluation.status == reused.evaluation.status == Status.PASSED:
                    r.fresh_ms = fresh.evaluation.timing.median_ms
                    r.reused_ms = reused.evaluation.timing.median_ms
                    r.fresh_speedup, r.reused_speedup = _speedup(fresh), _speedup(reused)
                    r.agree = ia is not None and ib is not None and ia[0] <= ib[1] and ib[0] <= ia[1]
                else:
                    r.agree = False
                if not r.agree:
                    failures.append(f"fresh vs reused worker {prob.name}/{r.workload}: A/A speedup "
                                    f"{_fmt(r.fresh_speedup)}x {_fmt_iv(ia)} vs {_fmt(r.reused_speedup)}x "
                                    f"{_fmt_iv(ib)}, noise intervals do not overlap (statuses "
                                    f"{fresh.evaluation.status.value}, {reused.evaluation.status.value})")
            rows.append(r)
    suites, inconclusive = summarize(rows, failures)
    return SelfTestReport(device=cfg.device, iters=cfg.n_iters(), rows=rows, suites=suites,
                          failures=failures, inconclusive=inconclusive)


def summarize(rows: list[Row], failures: list[str]) -> tuple[list[SuiteSummary], list[str]]:
    """Per-suite A/A distribution and verdict of ``rows``; appends each suite's failed A/A
    check to ``failures``. Returns (summaries, inconclusive): ``inconclusive`` names each
    suite none of whose workloads is conclusive (every A/A noise interval wider than
    :data:`AA_MAX_WIDTH`), with why: such a suite's A/A tested nothing, so it is neither a
    pass nor a failure (:attr:`SelfTestReport.outcome`)."""
    suites = []
    inconclusive: list[str] = []
    for name in dict.fromkeys(r.suite for r in rows):
        rs = [r for r in rows if r.suite == name]
        ratios = [r.aa_speedup for r in rs if r.aa_speedup is not None]
        ivs = [r.aa_interval for r in rs if r.aa_interval is not None]
        gi = None
        if ivs:
            gi = (math.exp(sum(math.log(a) for a, _ in ivs) / len(ivs)),
                  math.exp(sum(math.log(b) for _, b in ivs) / len(ivs)))
        within = sum(r.aa_within_noise for r in rs)
        bad_status = [r for r in rs if r.aa_status != Status.PASSED.value]
        aa_ok = not bad_status and within >= math.ceil(AA_MIN_SHARE * len(rs)) \
            and gi is not None and gi[0] <= 1.0 <= gi[1]
        for r in bad_status:
            failures.append(f"A/A {r.problem}/{r.workload}: the reference as candidate is {r.aa_status} "
                            f"({', '.join(r.findings) or 'no finding'})")
        if not aa_ok and not bad_status:
            failures.append(f"A/A {name}: {within}/{len(rs)} workloads within noise (need "
                            f"{math.ceil(AA_MIN_SHARE * len(rs))}), geomean interval {_fmt_iv(gi)}; outside: "
                            + ", ".join(f"{r.problem}/{r.workload} {_fmt(r.aa_speedup)}x {_fmt_iv(r.aa_interval)}"
                                        for r in rs if not r.aa_within_noise)[:600])
        kd_rows = [r for r in rs if r.kd_status is not None]
        ag_rows = [r for r in rs if r.agree is not None]
        conclusive = sum(r.aa_conclusive for r in rs)
        failed = not aa_ok or any(not r.kd_ok for r in kd_rows) or any(not r.agree for r in ag_rows)
        if failed:
            result = "fail"
        elif conclusive == 0:
            result = "inconclusive"
            widths = [r.aa_interval[1] / r.aa_interval[0] for r in rs
                      if r.aa_interval is not None and r.aa_interval[0] > 0]
            inconclusive.append(
                f"A/A {name}: no workload's noise interval is within {AA_MAX_WIDTH:g}x (narrowest "
                f"{_fmt(min(widths) if widths else None)}x over {len(rs)} workload(s)): the host was "
                "too noisy for the A/A to test anything")
        else:
            result = "pass"
        suites.append(SuiteSummary(
            suite=name, n=len(rs), p5=quantile(ratios, 0.05), p50=quantile(ratios, 0.5),
            p95=quantile(ratios, 0.95), within_noise=within, conclusive=conclusive,
            geomean_interval=gi, aa_ok=aa_ok,
            kd_n=len(kd_rows), kd_ok=sum(r.kd_ok for r in kd_rows),
            agree_n=len(ag_rows), agree_ok=sum(bool(r.agree) for r in ag_rows), result=result))
    return suites, inconclusive


def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def _fmt_iv(iv, inv: bool = False) -> str:
    if iv is None:
        return "-"
    a, b = (1 / iv[1], 1 / iv[0]) if inv else iv
    return f"[{a:.3g}, {b:.3g}]"
