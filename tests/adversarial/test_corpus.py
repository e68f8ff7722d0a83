"""The adversarial corpus: manifest sanity, and the CPU part run through the real harness
(every hostile candidate caught with its expected status, no honest candidate flagged)."""

import json
from pathlib import Path

import pytest
import torch

from solbench.integrity.corpus import load_manifest, run_corpus, select

HERE = Path(__file__).parent

#: threats.md classes ("Classes solbench must detect")
THREAT_CLASSES = {
    "zeros / tiny outputs", "partial write", "allocator reuse", "constant / parameter-only output",
    "identity / alias", "input mutation", "output caching / replay", "batch-and-skip",
    "side-stream work", "background thread / process", "lazy output", "timer / sync monkey patch",
    "precision downgrade", "faster than light", "crash / exit / hang", "fake verdict",
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
    report = run_corpus(HERE, "cpu", jobs=2)
    s = report["summary"]
    assert s["hostile"] >= 30 and s["honest"] >= 15
    _assert_clean(report)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_corpus_all_caught_no_honest_flagged():
    _assert_clean(run_corpus(HERE, "cuda", jobs=4))
