"""Red team of session 22 (CPU): the CUPTI activity recorder of the worker's "streams"
sessions (harness/cupti_activity.py) and what turns its records into spans
(harness/timing.py), attacked from inside the worker; a candidate whose build fails under a
worker without its seccomp filter (harness/workers.py). docs/threats.md, "Red team of
session 22 (CPU)"."""

from pathlib import Path

import pytest

from solbench.harness import EvalConfig, evaluate
from solbench.spec import Status

from harness_helpers import matmul_problem, py_solution

HERE = Path(__file__).resolve().parent


def _eval(tmp_path, name, source):
    p = matmul_problem(tmp_path, (16,), tol=1e-3)
    (t,) = evaluate(p, py_solution(name, source, p.definition.name),
                    EvalConfig(device="cpu", rounds=1, timing=False))
    return t.evaluation


@pytest.mark.parametrize("cand, names", [
    # timing.stream_segmentation is looked up by name in Worker._time_end at every block
    ("cand_segmentation_rebound.py", ["timing.stream_segmentation", "timing.kineto_stream_segmentation"]),
    # the code of the recorder's methods, changed in place (the pointers stay)
    ("cand_cupti_recorder_code.py", ["cupti_activity.ActivitySession.stop", "cupti_activity._Demangler.__call__"]),
])
def test_what_turns_device_records_into_spans_is_guarded(tmp_path, solbench_cache, cand, names):
    """Before: PASSED with no finding (neither the worker's snapshot nor the parent's memory
    read listed harness/timing.py's functions or the recorder's methods), and on CUDA every
    span would have read a tenth of the device's time."""
    ev = _eval(tmp_path, cand[:-3], (HERE / cand).read_text())
    assert ev.status == Status.REWARD_HACK, (ev.status, [f.check for f in ev.findings], ev.log[-800:])
    hp = [f for f in ev.findings if f.check == "harness_patch"]
    assert hp, [f.check for f in ev.findings]
    for n in names:
        assert n in hp[0].message, hp[0].message


HONEST = '''
import torch
from solbench.harness import timing, cupti_activity  # read, never changed

KINDS = (timing.DeviceActivity, cupti_activity.BUFFER_BYTES)


def run(a, b):
    return torch.matmul(a, b)
'''


def test_a_candidate_that_only_imports_those_modules_passes(tmp_path, solbench_cache):
    ev = _eval(tmp_path, "reads_harness_modules", HONEST)
    assert ev.status == Status.PASSED, (ev.status, [(f.check, f.message[:200]) for f in ev.findings])
    assert not [f for f in ev.findings if f.check == "harness_patch"]


# ---- the recorder's records, driven with the stand-in cupti of test_cupti_activity.py: the
# hostile candidates' own files run against it as they would against cupti-python

import importlib.util  # noqa: E402

import torch  # noqa: E402

from solbench.harness import cupti_activity  # noqa: E402
from solbench.harness.timing import stream_segmentation  # noqa: E402
from test_cupti_activity import FILL_MANGLED, C, M, S0, US, _kernel, fake  # noqa: E402,F401


def _load(cand):
    spec = importlib.util.spec_from_file_location(cand[:-3], HERE / cand)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _block(fake, s, call, n=3):
    """One timed block of ``n`` calls (us): iteration i's flush [200i, 200i+30] and end
    marker [200i+100, 200i+101] on the marker stream, the call's kernel [200i+40, 200i+60]
    on s7 (launched after ``call()`` returns, as the device runs it), the closing flush."""
    s.start()
    for i in range(n):
        t = 200 * i
        fake.launch(_kernel(FILL_MANGLED, t, t + 30, M))
        call()
        fake.launch(_kernel("ampere_sgemm_32x32_sliced1x4_nn", t + 40, t + 60, S0))
        fake.launch(_kernel(FILL_MANGLED, t + 100, t + 101, M))
    fake.launch(_kernel(FILL_MANGLED, 200 * n, 200 * n + 30, M))
    return s.stop()


def _spans(acts, n=3):
    seg, _ = stream_segmentation(acts, n, M, C)
    assert seg.ok, seg.reason
    return seg.span_ms


def test_callbacks_the_candidate_registers_do_not_see_the_records(fake):
    """cand_cupti_callbacks.py registers its own buffer callbacks on its first call. Before:
    every span read 0.002 ms for 0.020 ms of device time (its callback shortened the records
    and handed them on). Now the recorder registers its own again before its closing flush."""
    s = cupti_activity.open_session()
    cand = _load("cand_cupti_callbacks.py")
    a = torch.ones(2, 2)
    acts = _block(fake, s, lambda: cand.run(a, a))
    assert cand._installed  # the hostile did register its callbacks
    assert _spans(acts) == pytest.approx([0.020] * 3)


def test_records_flushed_and_edited_inside_the_block_are_not_used(fake):
    """cand_cupti_flush_edit.py forces a flush in every call and shortens what it delivered.
    Before: spans [0.002, 0.002, 0.020] ms and no note. Now anything delivered before the
    recorder's closing flush makes the block's records untrusted (CUDA events time it)."""
    s = cupti_activity.open_session()
    cand = _load("cand_cupti_flush_edit.py")
    a = torch.ones(2, 2)
    try:
        acts = _block(fake, s, lambda: cand.run(a, a))
    except Exception as e:  # noqa: BLE001 - the class is new: named, not imported
        assert type(e).__name__ == "RecordsNotTrusted", e
        assert "delivered before the recorder's closing flush" in str(e)
    else:
        pytest.fail(f"records the candidate edited were used: spans {_spans(acts)} ms")
    # the next block, with an honest call, is timed from its records again
    assert _spans(_block(fake, s, lambda: None)) == pytest.approx([0.020] * 3)


def test_callbacks_an_honest_candidate_left_registered_do_not_take_the_next_block(fake):
    """An honest candidate that profiles itself (its own CUPTI callbacks, or torch.profiler's,
    registered during a correctness round and left so) takes no record of a later block."""
    s = cupti_activity.open_session()
    theirs = []
    fake.activity_register_callbacks(lambda: (cupti_activity.BUFFER_BYTES, 0), theirs.extend)
    assert _spans(_block(fake, s, lambda: None)) == pytest.approx([0.020] * 3)
    assert theirs == []


def test_the_demangled_names_are_not_kept_between_sessions(fake):
    """The recorder keeps no demangling cache a candidate could fill (a TF32 GEMM's name
    mapped to a plain SGEMM's before the block); each session demangles its own records."""
    s = cupti_activity.open_session()
    assert not hasattr(s._demangle, "_cache")
    s.start()
    fake.launch(_kernel(FILL_MANGLED, 0, 1, M))
    fake.launch(_kernel(FILL_MANGLED, 2, 3, M))
    (a, b) = s.stop()
    assert a.name == b.name and a.name.startswith("void at::native::vectorized_elementwise_kernel<4")


# ---- a failed build under a worker whose seccomp filter is not in force

import os  # noqa: E402
import sys  # noqa: E402

from solbench.harness import sandbox  # noqa: E402

from test_seccomp_in_force import FAKE  # noqa: E402


@pytest.mark.skipif(sandbox.resolve_mode("cpu")[0] == "none", reason="no sandbox here")
def test_a_build_that_fails_is_recorded_under_the_workers_own_seccomp_word(tmp_path, solbench_cache, monkeypatch):
    """cand_sysv_then_fail.py's import runs in its worker's build and then fails it. Before:
    with the worker's filter not in force (a pyseccomp that filters nothing), the
    COMPILE_ERROR trace said environment.sandbox.seccomp true and had no seccomp_missing:
    the worker's hello was read by the handle, which start_candidate dropped with the failed
    build, and the trace took the parent's guess."""
    if not sandbox.sandbox_status("cpu")["seccomp"]:
        pytest.skip("no seccomp filter here (pyseccomp / libseccomp missing)")
    src = (HERE / "cand_sysv_then_fail.py").read_text()
    ev = _eval(tmp_path / "real", "sysv_then_fail", src)  # the real filter: nothing to say
    assert ev.status == Status.COMPILE_ERROR
    assert ev.environment.sandbox["seccomp"] is True
    assert not [f for f in ev.findings if f.check == "seccomp_missing"]

    fake = tmp_path / "fake"
    (fake / "pyseccomp-0.0.dist-info").mkdir(parents=True)
    (fake / "pyseccomp.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(fake))  # the worker's import path takes it first
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    ev = _eval(tmp_path / "fake_filter", "sysv_then_fail", src)
    assert ev.status == Status.COMPILE_ERROR
    assert ev.environment.sandbox["seccomp"] is False, ev.environment.sandbox
    assert "EBADF" in ev.environment.sandbox["seccomp_failure"]
    f = [x for x in ev.findings if x.check == "seccomp_missing"]
    assert f and f[0].severity == "advisory"


# ---- on CUDA (the lead's GPU run): the recorder attacks against the real cupti-python

MATMUL = "import torch\n\n\ndef run(a, b):\n    return torch.matmul(a, b)\n"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("cand", ["cand_cupti_callbacks.py", "cand_cupti_flush_edit.py", "cand_uses_torch_profiler.py"])
def test_on_cuda_the_recorder_attacks_time_the_real_work(tmp_path, solbench_cache, cand):
    """Each candidate computes an honest matmul; the hostile ones tamper with the records of
    its kernels (a tenth of their durations before the fix). Its latency must read as the
    plain matmul's (not below half of it), with no hack finding; the flush-and-edit one's
    blocks are timed by CUDA events where cupti-python is installed."""
    p = matmul_problem(tmp_path, (2048,), tol=1e-2)
    cfg = EvalConfig(device="cuda", rounds=2)
    (h,) = evaluate(p, py_solution("plain", MATMUL, p.definition.name), cfg)
    (t,) = evaluate(p, py_solution(cand[:-3], (HERE / cand).read_text(), p.definition.name), cfg)
    h, ev = h.evaluation, t.evaluation
    assert h.status == Status.PASSED, h.log[-500:]
    assert ev.status == Status.PASSED, (ev.status, [(f.check, f.message[:200]) for f in ev.findings])
    assert not [f for f in ev.findings if f.severity == "hack"]
    assert ev.performance.latency_ms > 0.5 * h.performance.latency_ms, (
        ev.performance.latency_ms, h.performance.latency_ms, ev.timing.method, ev.timing.notes)
    if cand == "cand_cupti_flush_edit.py" and importlib.util.find_spec("cupti") is not None:
        assert ev.timing.method == "cuda_event" and any("RecordsNotTrusted" in n for n in ev.timing.notes), \
            (ev.timing.method, ev.timing.notes)


def test_the_recorder_and_its_demangler_fit_the_guard_table_with_every_pin(fake):
    """Each name of worker._ACTS_PINNED / _DEMANGLER_PINNED is an attribute the guard table
    finds (a misspelt pin is dropped silently), and the entries are valid replies."""
    from solbench.harness import memguard, protocol, worker

    s = cupti_activity.open_session()
    entries = memguard.instance_table({"worker._acts": (s, worker._ACTS_PINNED),
                                       "worker._acts._demangle": (s._demangle, worker._DEMANGLER_PINNED)})
    assert [e["pinned"] for e in entries] == [list(worker._ACTS_PINNED), list(worker._DEMANGLER_PINNED)]
    for e in entries:
        protocol.InstanceEntry.model_validate(e)
