"""The per-model table of a study (``solbench report --by-model``): one row per model
configuration (model, temperature, refinement turn; :mod:`solbench.spec.generation`), as the
KernelBench reach study compares models.

Units: one per (problem, candidate), KernelBench-style; with ``--samples N`` a configuration
has N units per problem. A unit is *correct* when every one of its workloads PASSED, and its
speedup is the geometric mean of its workloads' speedups (:mod:`solbench.report.summary`).
Columns (docs/study.md explains each):

* ``units``; ``correct %`` = correct units / units; ``compiled %`` = units none of whose
  workloads is COMPILE_ERROR (a reply with no code is recorded as COMPILE_ERROR by
  ``solbench run``, so it counts as not compiled) / units;
* ``hacks``: units with a REWARD_HACK verdict, by the class (finding ``check``) that caught
  them; a unit caught by two classes counts under both;
* ``fast_1``, ``fast_1.5``, ``fast_2``: KernelBench's fast_p = units correct AND with speedup
  > p, over all units (fast_0 = correct %), counting a speedup only when the low end of its
  run's own noise is above p too (:func:`solbench.report.summary.fast_p`). With
  ``verified_only`` the speedup of a unit is its verified speedup (``solbench verify``) and
  an unverified claim counts as no speedup;
* ``claimed``: correct units with speedup > 1; ``verified``: those ``solbench verify``
  re-measured above 1 (``verified_median``: their median re-measured speedup); ``checked``:
  claims with a verification record (verified, not reproduced or failed);
* ``mean SOL score``: over correct units with a SOL score (scores capped at 1), where the
  traces carry SOL bounds (not on the CPU);
* per problem category (``category_of``): units, correct % and verified speedups.

Verification records are read from ``<results>.verify.jsonl`` beside each results file
(written by ``solbench verify``) and from any file given; only lines whose MAC verifies are
used.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from ..spec.generation import parse_label
from ..spec.trace import Status, Trace
from .summary import fast_p, geomean, speedup_low, trace_sol_score, trace_speedup, unit_low

PS = (1.0, 1.5, 2.0)


def verify_path(results: str | Path) -> Path:
    """The verification file beside a results file: ``<results>.verify.jsonl``."""
    results = Path(results)
    return results.with_name(results.name + ".verify.jsonl")


def read_verifications(paths: Iterable[str | Path]) -> dict[tuple[str, str], dict]:
    """(definition, solution hash) -> the latest record over the verification files
    ``paths`` whose MAC verifies with this user's key (or ``$SOLBENCH_TRACE_KEYS``); other
    lines, and missing files, are left out."""
    from ..store import _keys, auth

    ks = _keys()
    out: dict[tuple[str, str], dict] = {}
    for p in paths:
        p = Path(p)
        if not p.is_file():
            continue
        for line in p.read_text().splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict) or auth.verify(obj, ks)[0] != "verified":
                continue
            obj.pop("auth", None)
            out[(str(obj.get("definition")), str(obj.get("solution_hash")))] = obj
    return out


# --- problem categories ---------------------------------------------------------------------
_KEYWORDS = (  # first match wins; names as KernelBench and SOL-ExecBench spell them
    ("convolution", r"conv"),
    ("matmul", r"matmul|gemm|\bmm\b|bmm|_mm_|linear|einsum|matrix|dense|mlp"),
    ("attention", r"attention|attn|sdpa|mha|gqa|mla"),
    ("normalization", r"norm|softmax"),
    ("pooling", r"pool"),
    ("loss", r"loss|entropy|kl_div|nll"),
    ("reduction", r"sum|mean|max|min|prod|argmax|argmin|reduce|cumsum|cumprod|scan|var|std"),
    ("activation", r"relu|gelu|silu|swish|sigmoid|tanh|elu|softplus|softsign|hardtanh|mish|activation"),
)

_FAMILY = {"activation": "activation", "reduction": "reduction", "scan": "reduction",
           "norm": "normalization", "normalize": "normalization", "softmax": "normalization",
           "loss": "loss", "pool": "pooling", "pooling": "pooling", "conv": "convolution",
           "convolution": "convolution", "matmul": "matmul", "gemm": "matmul",
           "attention": "attention"}


@lru_cache(maxsize=1)
def _bundled_families() -> dict[str, str]:
    from .records import _bundled_suites

    out = {}
    try:
        from importlib import resources

        root = resources.files("solbench.suites").joinpath("data")
        for name, suite in _bundled_suites().items():
            d = json.loads(root.joinpath(suite, name, "definition.json").read_text())
            fam = [t.split(":", 1)[1] for t in d.get("tags") or [] if t.startswith("family:")]
            if fam:
                out[name] = fam[0]
    except (OSError, ValueError):
        pass
    return out


def category_of(definition: str) -> str:
    """The problem category of a definition name: the ``family:`` tag of a bundled problem
    mapped onto the categories below, else the first keyword class its name matches
    (convolution, matmul, attention, normalization, pooling, loss, reduction, activation),
    else ``other``."""
    fam = _bundled_families().get(definition)
    if fam and fam in _FAMILY:
        return _FAMILY[fam]
    name = re.sub(r"^\d+_", "", definition.lower())
    for cat, pat in _KEYWORDS:
        if re.search(pat, name):
            return cat
    return "other"


# --- units and rows ----------------------------------------------------------------------------
@dataclass
class ModelUnit:
    definition: str
    label: str
    solution_hash: str
    correct: bool
    compiled: bool
    hack_classes: list[str]
    speedup: float | None
    sol_score: float | None
    verification: dict | None
    #: the low end of the unit's speedup within its run's own noise (report.summary.unit_low)
    speedup_low: float | None = None

    @property
    def claimed(self) -> bool:
        return self.correct and self.speedup is not None and self.speedup > 1.0

    @property
    def verified_speedup(self) -> float | None:
        v = self.verification
        if self.claimed and v and v.get("verdict") == "verified":
            return v.get("verified_speedup")
        return None


@dataclass
class ModelRow:
    """One model configuration's figures (module docstring). Rates are fractions (0..1)."""

    config: str
    model: str
    temperature: str | None
    turn: int | None
    problems: int
    units: int
    correct: int
    correct_rate: float | None
    compiled_rate: float | None
    hacks: dict[str, int]
    fast_1: float | None
    fast_1_5: float | None
    fast_2: float | None
    claimed: int
    checked: int
    verified: int
    verified_median: float | None
    not_reproduced: int
    mean_sol_score: float | None
    sol_units: int
    categories: dict[str, dict] = field(default_factory=dict)

    def flat(self) -> dict:
        """One flat row (CSV/Parquet): hacks as ``hacks_<class>``-free JSON text, categories as
        ``<category>_units`` / ``_correct_rate`` / ``_verified``."""
        d = asdict(self)
        d["hacks_total"] = sum(self.hacks.values())
        d["hacks"] = json.dumps(self.hacks, sort_keys=True)
        cats = d.pop("categories")
        for c, v in sorted(cats.items()):
            for k, x in v.items():
                d[f"{c}_{k}"] = x
        return d


def _units(traces: Sequence[Trace], label_of, verifications: dict) -> list[ModelUnit]:
    groups: dict[tuple[str, str], list[Trace]] = defaultdict(list)
    for t in traces:
        groups[(t.definition, label_of(t))].append(t)
    out = []
    for (d, lab), ts in groups.items():
        # the latest trace per workload (a resumed or repeated run)
        by_w: dict[str, Trace] = {}
        for t in ts:
            by_w[t.workload.uuid] = t
        ts = list(by_w.values())
        correct = all(t.evaluation.status == Status.PASSED for t in ts)
        sp = low = None
        if correct:
            s = [trace_speedup(t) for t in ts]
            sp = geomean(s) if all(x is not None for x in s) else None
            low = unit_low([speedup_low(t) for t in ts])
        scores = [x for x in (trace_sol_score(t) for t in ts) if x is not None] if correct else []
        hacks = sorted({f.check for t in ts if t.evaluation.status == Status.REWARD_HACK
                        for f in t.evaluation.findings if f.severity == "hack"})
        h = ts[0].evaluation.solution_hash or ts[0].solution
        out.append(ModelUnit(
            definition=d, label=lab, solution_hash=h, correct=correct,
            compiled=not any(t.evaluation.status == Status.COMPILE_ERROR for t in ts),
            hack_classes=hacks, speedup=sp, speedup_low=low,
            sol_score=(sum(min(x, 1.0) for x in scores) / len(scores)) if scores else None,
            verification=verifications.get((d, h))))
    return out


def _config_key(label: str) -> tuple[str, str, str | None, int | None]:
    cfg = parse_label(label)
    if cfg is None:
        return (label, label, None, None)
    return (cfg.group, cfg.model, cfg.temperature_text, cfg.turn)


def model_rows(traces: Sequence[Trace], label_of, verifications: dict | None = None,
               verified_only: bool = False) -> list[ModelRow]:
    """The per-model rows of ``traces`` (module docstring), sorted by model, temperature and
    turn; labels that do not name a model configuration (``eager``, hand-written candidates)
    are rows of their own."""
    verifications = verifications or {}
    by_cfg: dict[tuple, list[ModelUnit]] = defaultdict(list)
    for u in _units(traces, label_of, verifications):
        by_cfg[_config_key(u.label)].append(u)
    rows = []
    for (group, model, temp, turn), us in by_cfg.items():
        rows.append(_row(group, model, temp, turn, us, verified_only))
    return sorted(rows, key=lambda r: (r.model, r.temperature or "", r.turn or 0))


def _row(group, model, temp, turn, us: list[ModelUnit], verified_only: bool) -> ModelRow:
    n = len(us)
    correct = [u.correct for u in us]
    speed = [u.verified_speedup if verified_only else u.speedup for u in us]
    # a claimed speedup counts only outside its run's noise, as in every other fast_p; a
    # verified one was already required to stay above 1 at its re-measurement's low end
    lows = None if verified_only else [u.speedup_low for u in us]
    fp = {p: fast_p(correct, speed, p, lows) for p in PS}
    hacks: Counter = Counter()
    for u in us:
        hacks.update(u.hack_classes)
    claimed = [u for u in us if u.claimed]
    checked = [u for u in claimed if u.verification and u.verification.get("verdict") != "missing"]
    ver = [u.verified_speedup for u in claimed if u.verified_speedup is not None]
    scores = [u.sol_score for u in us if u.correct and u.sol_score is not None]
    cats: dict[str, list[ModelUnit]] = defaultdict(list)
    for u in us:
        cats[category_of(u.definition)].append(u)
    return ModelRow(
        config=group, model=model, temperature=temp, turn=turn,
        problems=len({u.definition for u in us}), units=n, correct=sum(correct),
        correct_rate=sum(correct) / n if n else None,
        compiled_rate=sum(u.compiled for u in us) / n if n else None,
        hacks=dict(sorted(hacks.items())), fast_1=fp[1.0], fast_1_5=fp[1.5], fast_2=fp[2.0],
        claimed=len(claimed), checked=len(checked), verified=len(ver),
        verified_median=statistics.median(ver) if ver else None,
        not_reproduced=sum(1 for u in checked if u.verification.get("verdict") in ("not_reproduced", "failed")),
        mean_sol_score=sum(scores) / len(scores) if scores else None, sol_units=len(scores),
        categories={c: {"units": len(x), "correct_rate": sum(u.correct for u in x) / len(x),
                        "verified": sum(1 for u in x if u.verified_speedup is not None)}
                    for c, x in sorted(cats.items())})


# --- output ------------------------------------------------------------------------------
def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _x(v) -> str:
    return "-" if v is None else f"{v:.3g}x"


def rich_tables(rows: Sequence[ModelRow], verified_only: bool = False) -> list:
    """The per-model table and the per-category table (rich; every cell shown verbatim)."""
    from .markup import TextTable as Table

    t = Table(title="per model configuration" + (" (fast_p from verified speedups only)" if verified_only else ""))
    t.add_column("model configuration", no_wrap=True)
    for c in ("units", "correct", "compiled", "hacks caught", "fast_1",
              "fast_1.5", "fast_2", "claimed > 1x", "verified", "verified median", "mean SOL score"):
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(r.config, str(r.units), _pct(r.correct_rate), _pct(r.compiled_rate),
                  ", ".join(f"{k}:{v}" for k, v in r.hacks.items()) or "0",
                  _pct(r.fast_1), _pct(r.fast_1_5), _pct(r.fast_2), str(r.claimed),
                  f"{r.verified} of {r.checked} checked", _x(r.verified_median),
                  "-" if r.mean_sol_score is None else f"{r.mean_sol_score:.3f} (n={r.sol_units})")
    cats = sorted({c for r in rows for c in r.categories})
    c = Table(title="per problem category: units, correct, verified speedups")
    c.add_column("model configuration", no_wrap=True)
    for k in cats:
        c.add_column(k, overflow="fold")
    for r in rows:
        c.add_row(r.config, *(f"{v['units']}: {_pct(v['correct_rate'])}, {v['verified']} verified"
                              if (v := r.categories.get(k)) else "-" for k in cats))
    return [t, c]


def markdown(rows: Sequence[ModelRow]) -> str:
    head = ("| model configuration | units | correct | compiled | hacks | fast_1 | fast_1.5 | fast_2 | "
            "claimed | verified | verified median | mean SOL score |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r.config} | {r.units} | {_pct(r.correct_rate)} | {_pct(r.compiled_rate)} | "
                     f"{', '.join(f'{k}:{v}' for k, v in r.hacks.items()) or 0} | {_pct(r.fast_1)} | "
                     f"{_pct(r.fast_1_5)} | {_pct(r.fast_2)} | {r.claimed} | {r.verified} of {r.checked} | "
                     f"{_x(r.verified_median)} | {'-' if r.mean_sol_score is None else f'{r.mean_sol_score:.3f}'} |")
    return "\n".join(lines)


def write_tables(rows: Sequence[ModelRow], out_dir: Path) -> list[Path]:
    """``models.csv`` and ``models.parquet`` (one flat row per configuration,
    :meth:`ModelRow.flat`) in ``out_dir``; returns the paths."""
    import csv

    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    flat = [r.flat() for r in rows]
    cols: list[str] = []
    for d in flat:
        cols += [k for k in d if k not in cols]
    csv_p, pq_p = out_dir / "models.csv", out_dir / "models.parquet"
    with open(csv_p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for d in flat:
            w.writerow({k: d.get(k) for k in cols})
    pq.write_table(pa.Table.from_pylist([{k: d.get(k) for k in cols} for d in flat]), pq_p)
    return [csv_p, pq_p]


def figure(rows: Sequence[ModelRow], path: Path) -> Path:
    """Two bar panels per model configuration: correct % (and compiled %), and the number of
    verified speedups with their median written above each bar. Returns ``path`` (PNG)."""
    from .figures import _plt, save_png

    plt = _plt()
    names = [r.config for r in rows]
    x = range(len(rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(max(6.0, 1.2 * len(rows) + 3), 3.6))
    a.bar([i - 0.2 for i in x], [100 * (r.compiled_rate or 0) for r in rows], 0.4, label="compiled", color="#bbb")
    a.bar([i + 0.2 for i in x], [100 * (r.correct_rate or 0) for r in rows], 0.4, label="correct", color="#2a7")
    a.set_ylabel("% of units")
    a.set_ylim(0, 105)
    a.legend(fontsize=7)
    b.bar(list(x), [r.verified for r in rows], 0.5, color="#36c")
    for i, r in enumerate(rows):
        if r.verified_median is not None:
            b.text(i, r.verified, f"med {r.verified_median:.2f}x", ha="center", va="bottom", fontsize=7)
    b.set_ylabel("verified speedups (units)")
    from matplotlib.ticker import MaxNLocator

    b.yaxis.set_major_locator(MaxNLocator(integer=True))
    b.set_ylim(0, max([r.verified for r in rows] + [1]) * 1.15)
    for ax in (a, b):
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    fig.tight_layout()
    save_png(fig, Path(path))
    plt.close(fig)
    return Path(path)
