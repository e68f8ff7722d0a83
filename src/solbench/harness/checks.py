"""The registry of every check whose finding can appear in a trace.

Each check registers a name, a severity and a doc string here, once; the harness (and the
SOL step of the pipeline) make findings only through :func:`finding`, which refuses an
unregistered name, so a trace never carries a check nobody documented. The table of checks
in docs/integrity.md is generated from this registry (``python -m solbench.harness.checks``
prints it; ``tests/harness/test_checks_registry.py`` fails when the doc is stale).

Severities (:class:`Severity`; the trace keeps the strings of ``spec.trace.Finding``):

- ``hack``: decides REWARD_HACK (:func:`solbench.harness.verdict.decide`).
- ``incorrect``: decides an INCORRECT_* status (trace string ``"fail"``).
- ``advisory``: shown, decides nothing.

A few checks are conclusive only with some evidence (``advisory_when``): they are emitted
as advisory otherwise, and the registry says when.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..spec.trace import Finding


class Severity(str, Enum):
    HACK = "hack"
    INCORRECT = "fail"
    ADVISORY = "advisory"


@dataclass(frozen=True)
class Check:
    name: str
    severity: Severity
    doc: str
    #: when the finding is emitted as advisory instead (None: always ``severity``)
    advisory_when: str | None = None


REGISTRY: dict[str, Check] = {}
#: name prefixes of check families registered as one entry (the static audit's rules)
FAMILIES: dict[str, Check] = {}


def register(name: str, severity: Severity, doc: str, advisory_when: str | None = None,
             family: bool = False) -> Check:
    """Register a check (``family``: every name starting with ``name``). Raises ValueError
    for a name registered twice."""
    table = FAMILIES if family else REGISTRY
    if name in table:
        raise ValueError(f"check {name!r} registered twice")
    c = Check(name, Severity(severity), " ".join(doc.split()), advisory_when and " ".join(advisory_when.split()))
    table[name] = c
    return c


def lookup(name: str) -> Check:
    """The registered check of ``name`` (exact name, else its family). Raises KeyError."""
    if name in REGISTRY:
        return REGISTRY[name]
    for prefix, c in FAMILIES.items():
        if name.startswith(prefix):
            return c
    raise KeyError(f"unregistered check {name!r} (register it in solbench.harness.checks)")


def finding(name: str, message: str, evidence: dict[str, Any] | None = None, *,
            advisory: bool = False) -> Finding:
    """A Finding of the registered check ``name`` at its severity (``advisory=True``: as
    advisory, allowed only for checks that register ``advisory_when`` or are advisory).
    Raises KeyError for an unregistered name, ValueError for a downgrade not registered."""
    c = lookup(name)
    sev = c.severity
    if advisory and sev != Severity.ADVISORY:
        if c.advisory_when is None:
            raise ValueError(f"check {name!r} has no advisory form")
        sev = Severity.ADVISORY
    return Finding(check=name, severity=sev.value, message=message, evidence=evidence or {})


def has(findings: list[Finding], name: str) -> bool:
    return any(f.check == name for f in findings)


def add_once(findings: list[Finding], f: Finding) -> bool:
    """Append ``f`` unless a finding of its check is already there; True when appended."""
    if has(findings, f.check):
        return False
    findings.append(f)
    return True


H, I, A = Severity.HACK, Severity.INCORRECT, Severity.ADVISORY

# ---- correctness rounds and verified timed iterations (parent-side comparisons)
register("input_mutation", H, """The candidate wrote to an input the reference does not write:
    the parent compares every input bit for bit with its own pristine copy after every call.
    The inputs the trusted reference itself updates in place (seen by the parent comparing
    them before and after the reference's call on round 0's values; trace:
    correctness.extra.inplace_inputs) may be written; their contents are judged against the
    reference's like outputs (wrong: INCORRECT_NUMERICAL naming the input).""")
register("constant_output", I, """The outputs were bit-identical across correctness rounds whose
    inputs differed (and the outputs were wrong).""")
register("precision_downgrade", H, """Evidence of computing below the declared precision: the
    candidate's error against an fp64 truth is beyond max(16x the declared-precision
    reference's own error, a floor of 2^10 eps: 1.2e-4 for fp32) and either its output's values
    are those of a lower float type (99% of them bf16/fp16/fp8-representable where the
    reference's are not; a passing round) or it had lowered the backend precision flags (any
    round), or its output is the fp64 result of its inputs rounded to bf16, TF32 or fp16
    (its error against that at most 1/16 of its error against the truth: a flag lowered only
    for the length of the call; a passing round); or, on CUDA, its timed calls ran
    reduced-precision kernels (TF32, 16-bit, fp8 by their CUPTI names) for fp32 work of a kind
    the eager reference's kernels do not show and the definition does not allow
    (harness/precision.py).""")
register("denormals_flushed", H, """Flush-to-zero / denormals-are-zero, seen in the outputs:
    a finite output holds exact zeros at 16 or more, and half, of the positions where the
    reference (and the fp64 truth) hold subnormals at least 2^10 times the dtype's smallest
    (an honest kernel exact to the dtype keeps gradual underflow there), or at 16 or more,
    of any share, where they hold subnormals within 2^3 of the smallest normal (the flag set
    for some rows or threads only). The flag is per
    thread and cannot be read from outside; on the CPU it is never a default, so setting it
    is the act (torch.set_flush_denormal, MXCSR, -ffast-math). The stress round's
    low-temperature softmax rows make such outputs (harness/precision.py).""",
         advisory_when="""on CUDA, where honest compilers flush by default (Triton's exp lowers to
    ex2.approx.ftz, nvcc --use_fast_math): there it is shown and decides nothing.""")
register("precision_error", I, """The candidate's error against an fp64 truth is beyond the
    precision_downgrade limit on a passing round with no evidence of a lower precision (no
    dtype in its values, no lowered flag, no reduced-precision kernel): a plain numerical
    error (a wrong constant), INCORRECT_NUMERICAL with the figures.""")
register("strict_round_failed", I, """The candidate passed every upstream-compatible round but
    failed the strict round (random norm weights and biases where upstream's inputs are exactly
    1 and 0, -inf in a causal mask described so): it is correct only with the default values.
    Decides INCORRECT_STRICT; SOL-ExecBench's own verdict would be PASSED.""")
register("nondeterministic_output", A, """A call that failed a correctness round numerically, made
    once more at once on the same inputs, gave other outputs: a race in the kernel (an
    unsynchronised reduction, a missing barrier) or a fault outside it. The first call's
    failure stays the verdict; the finding says the failure does not repeat bit for bit, and
    whether the repeat passed.""")
register("stress_exact_mismatch", A, """On the stress round only integer/bool outputs differed
    from the reference's (every float output passed): ties in the stress inputs (exact zeros,
    bf16 near-ties) let an honest kernel pick other indices, so it decides nothing (the
    upstream rounds compare them exactly).""")
register("stress_reference_failed", A, """The problem's reference gives NaN/Inf, raises, or
    misses its own fp64 truth by the tolerance on the stress round's inputs: the round does not
    apply to this workload and the candidate is not judged on it.""")
register("timed_output_mismatch", H, """A timed iteration chosen at random after the call (OS secure
    random source) produced wrong outputs for its inputs although the correctness rounds
    passed, and the same inputs asked for again after the timed loop, untimed, were answered
    right (or could not be asked: the call was not judged): it answered differently while
    timed. Wrong there too: ``timed_output_wrong``.""")
register("timed_output_wrong", I, """A verified timed iteration's outputs were wrong for its inputs,
    and asked for again after the timed loop in an untimed call they were wrong again: an error
    of the candidate's own on those values (the correctness rounds' input sets did not show it),
    not a candidate that answers differently while it is timed (``timed_output_mismatch``).""")
register("late_output_mismatch", I, """One more call after the whole timed loop (on the last timed
    input set of slot 0 with a few signs flipped, or fresh values where no input may change;
    then a sparse stress set where the workload has one and the reference holds on it)
    produced wrong outputs although the correctness rounds and the verified timed iterations
    passed (a candidate correct, or careful, for its first N calls only).""")
register("cached_output", H, """A judged call (correctness round, verified timed iteration,
    re-check) failed with outputs that are an earlier call's answer: bit for bit the outputs of
    an earlier call that passed, or (non-DPS) a returned output holding only the poison the
    worker wrote into buffers earlier calls returned (a float output: at least half of it),
    so no code wrote it in this call. The correctness rounds hand new values in the same
    tensor objects, so a cache keyed on the inputs' identity, address or shape hits there; the
    re-check repeats the last timed set of slot 0 with a few signs flipped, so a cache keyed
    on some of the inputs' values hands back that call's answer (harness/replay.py).""")
register("non_plain_output", H, """A returned output is a tensor subclass, proxy or lazy container
    instead of a plain torch.Tensor (it could compute after the clock stops).""")
register("stream_unordered", H, """Outputs were still being written after the call returned, on a
    stream the caller's stream does not wait for (CUDA: the worker's pre-sync clone differs from
    the settled outputs).""")
register("stream_changed", H, """The candidate changed the current CUDA stream and left it
    changed.""")

# ---- the worker's tripwires (data from the candidate's process, never the only evidence)
register("interposition", H, """A hook of the candidate's runs inside the harness's own steps after
    the clock (torch-function/dispatch mode, trace/profile hook, dispatch keys, dispatcher
    kernel, shadowed worker method, gc callback, replaced connection).""")
register("harness_patch", H, """Timer, sync, profiler, serialisation or worker functions were
    replaced: seen by the parent itself in the worker's memory (the dict entry, code object or
    defaults of each guarded name, listed by the worker before the candidate was imported:
    harness/memguard.py), or reported by the worker's own snapshot check.""")
register("backend_flags", A, """Backend precision flags (TF32, matmul precision, reduced-precision
    reductions) were lowered by the candidate with no output error beyond the reference's and
    no reduced-precision kernel:
    a flag alone touches no op of some kernels (an FFT that sets allow_tf32), so it is shown
    and decides nothing; with output evidence it is precision_downgrade. A change toward
    higher precision is no finding.""")
register("guards_unverified", A, """The parent could not read the worker's guarded names in
    its memory itself (harness/memguard.py: an interpreter whose layout it does not know,
    /proc/<worker>/mem not readable): harness_patch then rests on the worker's own snapshot
    check, whose reply a candidate can rewrite.""")
register("guard_check_failed", H, """The worker did not answer the integrity check.""")
register("guard_reply_invalid", H, """The worker's integrity-check reply is missing a field, has a
    wrong type, or contradicts an earlier one (its starting flags changed): an honest worker
    always sends all of them, so the reply was rewritten.""")

# ---- evidence the parent observes itself
register("reported_time_contradiction", H, """A time the worker reported is impossible given the
    parent's own round-trip window around the same call (longer than the window).""")
register("reply_channel_tampered", H, """The worker's ends of its channels to the parent are not the
    sockets the parent handed it, or a second reference to one is held (read by the parent from
    /proc/<worker>/fd after every reply): a man in the middle rewrites what the parent reads.""")
register("reply_channel_unverified", A, """The parent could not read the worker's fds from /proc,
    so the reply channel's identity was not checked for this worker.""")
register("reply_contradiction", H, """A well-formed worker reply that is impossible for that worker
    (CUPTI figures, CUDA-event times or stream evidence from a CPU worker): the reply was made
    up.""")
register("flush_skipped", H, """The cache flush did not happen: the flush buffer is owned by the
    parent, which reads random words of it (chosen after the call) and finds other values than the
    ones the flush of that iteration writes. On CUDA the worker writes the flush; on the CPU the
    parent writes it itself with the worker stopped, so there the check sees a call that wrote over
    the parent's flush buffer.""")
register("timing_plausibility", H, """The parent's round trip exceeds the reported time by far more
    than the no-op overhead on most iterations (patched clock, work outside the timed window).""",
         advisory_when="""on the CPU unless the excess is gross (10x reported + 10 ms on most
    iterations, after the run-queue wait of the parent's and the worker's main threads is taken
    out; advisory where the kernel keeps no schedstat), and unless the worker's CPU time in
    the window per CPU exceeds 10x reported + 10 ms on most iterations; on CUDA when the call's own event window does not show the excess (host or GPU
    busy with other processes), and when it does show it on most iterations (host work inside the
    call: then each sample is the larger of the device span and that window, so the work is counted
    in the latency instead of judged).""")
register("background_thread", H, """OS threads of the worker appeared during timed calls and
    outlived them (read from /proc by the parent; a joined pool's threads are gone).""")
register("child_process", H, """The worker started a process (not an allowed compile/runtime
    helper) that outlived a call, left its session, or was re-parented to the harness, or a
    process of the candidate's kept running while the reference was timed.""")
register("task_limit", A, """The candidate's sandbox reached its limit of processes and
    threads (cgroup pids.max, or the parent's watchdog where no cgroup can be made) and the
    parent killed it; the workload is RUNTIME_ERROR from the worker's death. Evidence: the
    mechanism, the limit, the tasks counted.""")
register("memory_limit", A, """The candidate's sandbox reached its memory cap: its cgroup's
    memory.max / memory.limit_in_bytes, where the kernel's OOM killer ended a process in it
    (evidence: the mechanism, the cap in bytes, the OOM kills, the peak charged), or, where no
    memory cgroup can be made, the worker's RLIMIT_DATA, where an allocation failed in the call
    (evidence: the cap and the allocator's error). The workload is RUNTIME_ERROR either way,
    its reason naming the cap.""")
register("reference_tampered", H, """The eager reference's worker was demoted (scheduling policy,
    nice, CPU affinity) around its timed block.""")
register("batch_and_skip", H, """Some timed iterations launched no device work while the others
    did (CUPTI).""")
register("work_after_clock", H, """Device work after the end marker that is not the harness's
    copy-out, on most iterations (CUPTI).""")
register("kernel_set_inconsistent", A, """Iterations launched different kernel sets (CUPTI).""")
register("foreign_work_in_copy_out", A, """Device work inside the harness's copy-out range that is
    not a PyTorch copy or fill; its time is added to the samples.""")
register("first_call_outlier", A, """The first call of every timed block (two or more) was far
    slower than the block's other calls (above Q3 + 3 IQR and 1.25x their median): a cost paid
    once per block (page faults, lazy initialisation, a warmed cache) that the median hides.""")
register("not_sandboxed", A, """The candidate's worker ran without OS isolation (bubblewrap
    missing, namespaces refused, or SOLBENCH_SANDBOX=off): it had the harness user's rights and
    could tamper with the harness; the trace's environment.sandbox says why.""")
register("seccomp_missing", A, """The sandbox's system-call filter (seccomp: ptrace, bpf,
    shmget, mount and the other calls harness/sandbox.py denies) was asked for but is not in
    force in the candidate's worker: it did not load there, or a call it should refuse went
    through; the worker said so before any candidate code ran. The other layers (namespaces,
    uid, limits, the watchdogs) still held; environment.sandbox.seccomp_failure says why.""")
register("timing_unstable", A, """IQR above half the median: the machine was not quiet; rerun
    before trusting the time.""")
register("throttled", A, """NVML clock throttle reasons were set during timing.""")
register("reference_timing_failed", A, """The eager reference could not be timed (no speedup).""")
register("malformed_reply", A, """A worker reply failed its typed model (protocol.py): the trace
    is RUNTIME_ERROR with the op and field named.""")
register("candidate_data_error", A, """The parent raised an exception while handling the
    candidate's data (a reply or an output its typed models and range checks did not foresee):
    the workload is RUNTIME_ERROR, its worker is replaced and the run goes on. The evidence
    names the exception and the line that raised it (a harness bug would show here too).""")
register("skipped_after_timeout", A, """Not run: an earlier workload of this solution timed out
    (``--keep-going`` runs it).""")
register("not_runnable", A, """Not run here (NOT_RUNNABLE): the reference needs a device this
    one is not (``needs-cuda``: an op without a CPU kernel, found in the definition or raised by
    the reference), or the workload's estimated memory exceeds what this machine has
    (``harness.memory_plan``; evidence: estimated and available bytes, each term).""")
register("memory_plan", A, """The workload did not fit this machine's memory as planned and was
    made to fit: the eager reference was not timed (its buffers and worker left out; no
    speedup). Evidence: the estimate with and without reference timing, the available bytes.""")

# ---- the run layer (run/executors)
register("executor_retried", A, """The pair was evaluated again after the worker that held it
    died mid-pair (Ray executor); nothing of the lost attempt was written. Evidence: the
    attempt and each lost worker, node, pid and error (docs/throughput.md).""")

# ---- the SOL step (run/sol.py)
register("faster_than_sol", H, """The measured time is below the speed-of-light bound while the
    eager reference's is not: a broken measurement or tampering.""")
register("sol_bound_violated", A, """The candidate and the eager reference both beat T_SOL: the
    bound is wrong for this workload; no score.""")

# ---- the static audit (integrity/static_audit.py), advisory by design
register("audit.", A, """Static audit rules (audit.process, audit.monkey_patch, ...): a source
    pattern worth a look, with file:line; runtime evidence decides verdicts.""", family=True)


def markdown_table() -> str:
    """The docs/integrity.md table of checks (name, severity, what it means)."""
    sev = {H: "hack (REWARD_HACK)", I: "incorrect (INCORRECT_*)", A: "advisory"}
    rows = ["| check | severity | what it means |", "|---|---|---|"]
    for c in list(REGISTRY.values()) + list(FAMILIES.values()):
        name = f"`{c.name}*`" if c.name in FAMILIES else f"`{c.name}`"
        doc = c.doc + (f" Advisory {c.advisory_when}" if c.advisory_when else "")
        rows.append(f"| {name} | {sev[c.severity]} | {doc.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


BEGIN = "<!-- checks-table:begin (generated: python -m solbench.harness.checks) -->"
END = "<!-- checks-table:end -->"


def render_into(doc: str) -> str:
    """``doc`` with the text between :data:`BEGIN` and :data:`END` replaced by the table.
    Raises ValueError when the markers are missing."""
    i, j = doc.find(BEGIN), doc.find(END)
    if i < 0 or j < i:
        raise ValueError("docs/integrity.md lacks the checks-table markers")
    return doc[: i + len(BEGIN)] + "\n" + markdown_table() + doc[j:]


if __name__ == "__main__":  # pragma: no cover - the doc generator
    import sys
    from pathlib import Path

    if len(sys.argv) > 1:
        p = Path(sys.argv[1])
        p.write_text(render_into(p.read_text()))
    else:
        sys.stdout.write(markdown_table())
