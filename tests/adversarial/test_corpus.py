"""The adversarial corpus: manifest sanity, and the CPU part run through the real harness
(every hostile candidate caught with its expected status, no honest candidate flagged)."""

import json
from pathlib import Path

import pytest
import torch

from solbench.integrity.corpus import QUICK, _groups, eval_config, load_manifest, run_corpus, select

HERE = Path(__file__).parent

#: threats.md classes ("Classes solbench must detect")
THREAT_CLASSES = {
    "zeros / tiny outputs", "partial write", "allocator reuse", "constant / parameter-only output",
    "identity / alias", "input mutation", "output caching / replay", "batch-and-skip",
    "side-stream work", "background thread / process", "lazy output", "timer / sync monkey patch",
    "precision downgrade", "faster than light", "crash / exit / hang", "fake verdict",
    "distribution shortcut", "trusted-side tampering",
}
HONEST_KINDS = {"eager", "torch.compile", "Triton with autotune", "cuBLAS via torch.matmul",
                "CUDA graphs that recompute", "DPS kernel", "caches a constant", "torch's own threads"}


def test_manifest_covers_every_class_and_the_brief():
    entries = load_manifest(HERE)
    hostile = [e for e in entries if e.kind == "hostile"]
    honest = [e for e in entries if e.kind == "honest"]
    assert len(hostile) >= 30 and len(honest) >= 15
    assert {e.cls for e in hostile} == THREAT_CLASSES
    assert HONEST_KINDS <= {e.cls for e in honest}
    for e in entries:
        assert (HERE / e.file).is_file(), e.file
        assert (HERE / e.problem).exists(), e.problem
        if e.kind == "honest":
            assert e.expect == ["PASSED"] and e.static == []
        else:
            assert "PASSED" not in e.expect
    files = [e.file for e in entries]
    assert len(files) == len(set(files))


def test_escape_and_hang_candidates_are_checked():
    """The pickle escape is checked by a marker the trusted parent would create if it ran the
    candidate's payload; the fd-forging candidate must end (not hang) within the entry limit."""
    by_file = {e.file: e for e in load_manifest(HERE)}
    pickle_entry = by_file["hostile/fake_verdict_pickle.py"]
    assert pickle_entry.parent_marker and "{pid}" in pickle_entry.parent_marker
    assert "solbench-corpus-pwned" in (HERE / pickle_entry.file).read_text()
    assert "hostile/fake_verdict_fds.py" in by_file


def test_groups_share_a_problem_and_are_balanced():
    entries = select(load_manifest(HERE), "cpu")
    groups = _groups(entries, chunk=12)
    assert sorted(e.file for g in groups for e in g) == sorted(e.file for e in entries)
    for g in groups:
        assert len({e.problem for e in g}) == 1 and 1 <= len(g) <= 12
    by_problem = {}
    for g in groups:
        by_problem.setdefault(g[0].problem, []).append(len(g))
    for sizes in by_problem.values():  # a problem's entries are split evenly
        assert max(sizes) - min(sizes) <= 1
    n_add = sum(e.problem == "problems/add_f32" for e in entries)
    assert len(by_problem["problems/add_f32"]) == -(-n_add // 12)


def test_quick_config():
    cfg = eval_config("cpu", QUICK)
    assert (cfg.rounds, cfg.n_iters(), cfg.verify, cfg.reference_timing) == (3, 6, 4, False)
    assert cfg.precision_check and cfg.timing
    full = eval_config("cpu")
    assert full.rounds == 5 and full.reference_timing
    with pytest.raises(ValueError, match="no_such_field"):
        eval_config("cpu", {"no_such_field": 1})


def test_device_selection():
    entries = load_manifest(HERE)
    cpu = select(entries, "cpu")
    cuda = select(entries, "cuda")
    assert all(e.device in ("any", "cpu") for e in cpu)
    assert all(e.device in ("any", "cuda") for e in cuda)
    assert any(e.device == "cuda" for e in cuda) and not any(e.device == "cuda" for e in cpu)


def _assert_clean(report):
    s = report["summary"]
    bad = [r for r in report["results"] if r["verdict"] not in ("caught", "ok")]
    msg = json.dumps([{k: r[k] for k in ("file", "status", "expect", "hack_findings", "detail")}
                      for r in bad], indent=1)[:6000]
    assert s["missed"] == [], msg
    assert s["false_positives"] == [], msg
    assert s["static_missed"] == [] and s["static_false_positives"] == []


@pytest.mark.slow
def test_cpu_corpus_all_caught_no_honest_flagged():
    # the CI setting (QUICK: 3 rounds, 6 timed iterations of which 4 verified, no reference
    # timing; 12 candidates per Evaluator): about 6 minutes on 2 idle cores. The full-strength
    # run is `python -m solbench.integrity.corpus tests/adversarial --jobs 2`
    # (bench/results/adversarial_cpu.json).
    report = run_corpus(HERE, "cpu", jobs=2, quick=True)
    s = report["summary"]
    assert s["hostile"] >= 30 and s["honest"] >= 15
    _assert_clean(report)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_corpus_all_caught_no_honest_flagged():
    _assert_clean(run_corpus(HERE, "cuda", jobs=4))
