"""The timed calls' outputs judged against the eager reference, from the parent.

Correctness rounds judge a candidate before it is timed; these checks judge the outputs of
the timed calls themselves, so a candidate cannot be right only while it is watched:

- :func:`verify_timed`: a random sample of timed iterations (drawn by the parent from the
  OS's secure random source, unknown to the worker) checked with the same limits as the
  correctness rounds; ``timed_output_mismatch`` (a hack until :func:`ask_again` settles it),
  ``input_mutation``;
- :func:`ask_again`: after the whole timed loop, the input set of a verified timed iteration
  that failed is asked for again in an untimed call judged like a correctness round: right
  there, the candidate answered differently while timed (``timed_output_mismatch`` stands, a
  hack); wrong there too, it is wrong for those inputs whenever asked, a data-dependent error
  the rounds' input sets missed (``timed_output_wrong``, INCORRECT);
- :func:`late_recheck`: after the whole timed loop, one more call on the last timed input set
  of slot 0 with a few values changed (an output cache keyed on the inputs' identity hands
  back that call's answer: ``cached_output``), then one on the sparse stress set where the
  workload has one (a candidate careful only during the correctness rounds);
  ``late_output_mismatch`` (INCORRECT).

Both run between timed blocks, outside every timed window; the reference's work here is the
parent's (:class:`~.rounds.Oracle`).
"""

from __future__ import annotations

from typing import Callable

import torch

from . import protocol
from .checks import add_once, finding, has
from .correctness import bits_equal
from .evidence import CandidateError, WorkloadRun, interposition_seen, kids_before, process_check, returned_issue
from .rounds import Oracle, inplace_judged

#: input-set index of the sparse stress set of the re-check after the timed loop (its seed
#: under ``--seed``)
LATE_STRESS_SET = 503


def late_recheck(run: WorkloadRun, oracle: Oracle, scalars: list, *, fresh: Callable[[], dict],
                 next_seed: Callable[[], int]) -> None:
    """One more call, after the whole timed loop, judged like a correctness round: a
    candidate correct for its first N calls and wrong afterwards is caught whatever N is
    (the sampled verification of timed iterations catches it only with the sample's
    probability). Its input set is the last timed set of slot 0 with a few values
    changed (:func:`~.replay.perturbed`), in the same tensor objects: an output cache keyed
    on the inputs' identity, or on their values but not all of them, hands back the
    answer of that timed call, wrong for these inputs and bit for bit that call's, which
    is ``cached_output`` (:func:`_late_call`); a fresh set where the workload has no
    input whose values may change (:func:`~.replay.perturbable_inputs`). Then, where the
    workload has a sparse stress set (docs/inputs.md) and the reference holds on it, one
    call on such a set: a candidate careful only during the correctness rounds (it counts
    its calls; every timed input is upstream's) is caught there.
    ``late_output_mismatch`` (INCORRECT) when the outputs are wrong. ``scalars``: the slots'
    scalar arguments (slot 0's is replaced). ``fresh``: a new timed input set; ``next_seed``:
    the seed of the next timed input set (both number the timed sets, as the timed loop's)."""
    from ..inputs import differing_profiles, make_inputs
    from .replay import all_poison, perturbable_inputs, perturbed
    from .rounds import _exact_only

    last = run.slots.pristine[0]
    names = perturbable_inputs(run.problem, run.w, skip=run.inplace_inputs) if last is not None else []
    pert = None
    if names:
        # the flips' positions come from an input-set seed of their own (recorded; under
        # --seed derived, so the run replays), drawn as a fresh set's would be
        pert = perturbed(last, names, next_seed())
    if pert is None:
        ok = _late_call(run, oracle, scalars, fresh(), "the re-check after the timed loop", stress=False)
    else:
        values, changed = pert
        ok = True
        if any(all_poison(o) for o in run.slots.outputs(0)):
            # a reference block came last and poisoned slot 0's outputs
            # (timed.TimedBlocks._reference_block): the candidate's answer for that timed set
            # is asked for again, and judged
            ok = _late_call(run, oracle, scalars, last, "the re-check after the timed loop (the last timed "
                            "input set of slot 0 again)", stress=False)
        if ok:
            ok = _late_call(run, oracle, scalars, values, "the re-check after the timed loop", stress=False,
                            earlier=(last, changed))
    if not ok:
        return
    try:
        if "stress_sparse" not in differing_profiles(run.problem, run.w):
            return
        values = make_inputs(run.problem, run.w, run.seeds.next(LATE_STRESS_SET), run.cfg.device,
                             profile="stress_sparse")
        ref_out, ref_after = oracle.run_observed(values, keep=run.inplace_inputs)
    except Exception:  # noqa: BLE001 - the reference does not run there: nothing to judge
        return
    if oracle.check_reference(ref_out, run.slots) or \
            oracle.stress_reference_issue(ref_out, values, run.tol):
        return
    _late_call(run, oracle, scalars, values, "the stress re-check after the timed loop", stress=True,
               ref_out=ref_out, ref_after=ref_after, exact_only=_exact_only)


def _late_call(run: WorkloadRun, oracle: Oracle, scalars: list, values: dict, when: str, *, stress: bool,
               ref_out=None, ref_after=None, exact_only=None, earlier: tuple[dict, dict] | None = None) -> bool:
    """One call of :func:`late_recheck` on ``values``; True when it passed. ``ref_out`` /
    ``ref_after``: the reference's outputs and inputs after its call on ``values``
    (:meth:`~.rounds.Oracle.run_observed`), computed here when not given. ``earlier``:
    (the input set of the last timed call on slot 0, name -> values changed) when
    ``values`` is that set perturbed: a failing call whose outputs are bit for bit those
    the timed call left is a replay once those are checked right for that set."""
    slots, findings = run.slots, run.findings
    # what the last timed call on slot 0's input objects left there: a cache keyed on
    # them hands it back for these new values (the call is then judged a replay)
    last0 = [o.clone() for o in slots.outputs(0)]
    rep = _call_on_slot0(run, scalars, values, when)
    if rep is None:
        return False
    issue = returned_issue(run, rep)
    outs = [o.clone() for o in slots.outputs(0)]
    ip_cand = slots.input_tensors(0, run.inplace_inputs)  # the same snapshot for them
    if ref_out is None:
        ref_out, ref_after = oracle.run_observed(values, keep=run.inplace_inputs)
    if issue is None:
        rep_c, pf = oracle.judge(outs, ref_out, values, run.tol, slots, run.cfg.precision_check,
                                 precision_evidence=not stress,
                                 inplace=inplace_judged(run, ref_after, ip_cand))
        if pf is not None and not has(findings, pf.check):
            # the act can show in a call that passes (flush-to-zero is inside any tolerance):
            # this call is the one every candidate meets after its last timed call
            pf.message = f"{when}: " + pf.message
            findings.append(pf)
        if rep_c.passed or (stress and exact_only is not None and exact_only(rep_c, slots)):
            return True
        if earlier is None:
            also = [("the last timed call on the same input objects", last0)]
        else:
            also = _earlier_right(run, oracle, outs, last0, *earlier)
        f = run.replay.failed_call(when, outs, findings, returned=rep.returned is not None, also=also)
        if f is not None and earlier is not None:
            f.evidence["input_set"] = {"repeats": "the last timed call on slot 0",
                                       "sign_flipped": dict(earlier[1])}
        o = next(x for x in rep_c.outputs if x.failed_check)
        why, ev = f"{o.name}: {o.failed_check}: {o.detail}", {"failed_check": o.failed_check, "rel_l2": o.rel_l2,
                                                   "write_coverage": o.write_coverage, "output": o.name}
        if earlier is not None:
            ev["sign_flipped"] = dict(earlier[1])
    else:
        why, ev = issue[1], {"returned": issue[1]}
    ev["profile"] = "stress_sparse" if stress else "upstream"
    add_once(findings, finding(
        "late_output_mismatch",
        f"{when}: output wrong for its inputs ({why}) although the correctness rounds"
        + (", the stress rounds among them," if stress else "") + " and the verified timed iterations passed",
        ev))
    return False


def _earlier_right(run: WorkloadRun, oracle: Oracle, outs: list[torch.Tensor], last0: list[torch.Tensor],
                   last: dict, changed: dict[str, int]) -> list[tuple[str, list[torch.Tensor]]]:
    """The earlier call a failing perturbed re-check is compared with: [(label, outputs
    the last timed call on slot 0 left)] when this call's outputs are bit for bit those
    and they are right for that call's input set ``last`` (judged against the reference
    now: an unjudged timed call's outputs prove nothing), else []. The reference runs only
    on this path, never for a call that passed."""
    if len(last0) != len(outs) or not all(bits_equal(o, p) for o, p in zip(outs, last0)):
        return []
    try:
        ref_out, _ = oracle.run_observed(last, keep=())
        rep, _ = oracle.judge(last0, ref_out, last, run.tol, run.slots, run.cfg.precision_check,
                              precision_evidence=False)
    except Exception:  # noqa: BLE001 - no judgement of the earlier call: no replay claimed
        return []
    if not rep.passed:
        return []
    n = sum(changed.values())
    return [(f"the last timed call on slot 0, whose input set this call's repeats with {n} value(s) "
             f"changed in {sorted(changed)} (its outputs checked right for its own set)", last0)]


def verify_timed(run: WorkloadRun, oracle: Oracle, i: int, s: int, *, dps: bool) -> None:
    """Check the outputs of timed iteration ``i`` (slot ``s``), and the inputs the
    reference writes in place (``run.inplace_inputs``), against the reference's on the same
    values, with the same limits as the correctness rounds; any other input written is
    ``input_mutation``."""
    slots, findings = run.slots, run.findings
    outs = [o.clone() for o in slots.outputs(s)]  # snapshot at once: late writes do not count
    ip_cand = slots.input_tensors(s, run.inplace_inputs)
    ref_out, ref_after = oracle.run_observed(slots.pristine[s], keep=run.inplace_inputs)
    rep, pf = oracle.judge(outs, ref_out, slots.pristine[s], run.tol, slots, run.cfg.precision_check,
                           inplace=inplace_judged(run, ref_after, ip_cand))
    if pf is not None and not has(findings, pf.check):
        pf.message = f"timed iteration {i}: " + pf.message
        findings.append(pf)
    if rep.passed:
        run.replay.passed_call(f"timed iteration {i}", outs)
    else:
        run.replay.failed_call(f"timed iteration {i}", outs, findings, returned=not dps)
    if not rep.passed and not has(findings, "timed_output_mismatch"):
        o = next(x for x in rep.outputs if x.failed_check)
        # kept (off the device: the memory plan holds one set a slot) for :func:`ask_again`
        run.timed_miss = (i, {k: v.cpu() if isinstance(v, torch.Tensor) else v
                              for k, v in slots.pristine[s].items()})
        findings.append(finding(
            "timed_output_mismatch",
            f"timed iteration {i}: output wrong for its inputs ({o.name}: {o.failed_check}: {o.detail}) "
            "although the correctness rounds passed",
            {"iteration": i, "failed_check": o.failed_check, "rel_l2": o.rel_l2,
             "write_coverage": o.write_coverage, "output": o.name}))
    _input_mutation(run, s, f"timed iteration {i}")


def _input_mutation(run: WorkloadRun, s: int, when: str) -> None:
    """``input_mutation`` (once) when the last call on slot ``s`` wrote an input the
    reference does not write."""
    mutated = run.slots.inputs_intact(s, run.inplace_inputs)
    if mutated and not has(run.findings, "input_mutation"):
        run.findings.append(finding("input_mutation", f"{when} wrote to inputs {mutated}",
                                    {"inputs": mutated, "inplace_inputs": list(run.inplace_inputs)}))


def _call_on_slot0(run: WorkloadRun, scalars: list, values: dict, when: str):
    """One untimed call of the candidate on ``values``, filled into slot 0 (``scalars[0]``
    set), with the checks of any judged call: interposition, new processes, inputs written.
    The reply, or None when the call interposed (its outputs are not judged). Raises
    CandidateError when the call fails."""
    scalars[0] = run.slots.fill(0, values)
    before = kids_before(run)
    rep = protocol.request(run.h, protocol.Call(slot=0, scalars=scalars[0]), timeout_s=run.call_timeout_s)
    if isinstance(rep, protocol.ErrorReply):
        raise CandidateError(f"{when}: {rep.type}: {rep.message}")
    interposition_seen(rep, run.findings, when)
    process_check(run, before, f"in {when}", late=True)
    if rep.interposition:
        return None
    _input_mutation(run, 0, when)
    return rep


def ask_again(run: WorkloadRun, oracle: Oracle, scalars: list) -> None:
    """Settle a ``timed_output_mismatch``: the input set of the first verified timed
    iteration that failed (``run.timed_miss``) asked for again, after the whole timed loop,
    in an untimed call on slot 0 judged like a correctness round.

    A hack is a candidate that answers differently while it is timed (skips work, detects
    the loop, caches): asked again outside the loop it answers right, and the finding stands,
    with that evidence. A candidate wrong for those inputs there too is wrong whenever asked,
    an error of its own that the correctness rounds' input sets did not show (a wrong constant
    that only some rows' values expose): the finding is replaced by ``timed_output_wrong``
    (INCORRECT), which keeps the timed iteration's figures. A repeat whose outputs are an
    earlier passing call's bits is ``cached_output`` (:mod:`.replay`), a hack either way.
    Anything else (an interposition, a returned output of the wrong kind, a repeat that
    cannot be judged) leaves the hack. Raises CandidateError when the call fails."""
    miss, findings, slots = run.timed_miss, run.findings, run.slots
    f = next((x for x in findings if x.check == "timed_output_mismatch"), None)
    if miss is None or f is None or slots is None:
        return
    i, kept = miss
    run.timed_miss = None
    when = f"timed iteration {i}'s input set asked again after the timed loop"
    slots.forget(0)  # one set on the device at a time
    try:
        values = {k: v.to(run.cfg.device) if isinstance(v, torch.Tensor) else v for k, v in kept.items()}
    except Exception:  # noqa: BLE001 - (device memory) no repeat: the finding stands as it is
        return
    del kept
    rep = _call_on_slot0(run, scalars, values, when)
    if rep is None or returned_issue(run, rep) is not None:
        return
    outs = [o.clone() for o in slots.outputs(0)]
    ip_cand = slots.input_tensors(0, run.inplace_inputs)
    try:
        ref_out, ref_after = oracle.run_observed(values, keep=run.inplace_inputs)
        rep_c, _ = oracle.judge(outs, ref_out, values, run.tol, slots, run.cfg.precision_check,
                                precision_evidence=False, inplace=inplace_judged(run, ref_after, ip_cand))
    except Exception:  # noqa: BLE001 - no judgement of the repeat: the finding stands as it is
        return
    if rep_c.passed:
        run.replay.passed_call(when, outs)
        f.evidence["asked_again"] = "right"
        f.message += ("; asked again after the timed loop, untimed, on the same inputs: right (it "
                      "answered differently while timed, or its outputs vary from run to run: a race)")
        return
    # against the earlier calls that passed only: the late re-check's outputs were not
    # judged right here, and an honest error's degenerate outputs (all NaN) repeat bit for bit
    if run.replay.failed_call(when, outs, findings, returned=rep.returned is not None) is not None:
        return
    o = next(x for x in rep_c.outputs if x.failed_check)
    findings[findings.index(f)] = finding(
        "timed_output_wrong",
        f"timed iteration {i}: output wrong for its inputs, and wrong again when the same inputs were asked "
        f"for after the timed loop, untimed ({o.name}: {o.failed_check}: {o.detail}): an error the "
        "correctness rounds' input sets did not show",
        {**f.evidence, "asked_again": {"failed_check": o.failed_check, "rel_l2": o.rel_l2, "output": o.name}})
