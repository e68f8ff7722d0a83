"""Hostile or broken endpoints and replies (a new user's and an attacker's tries of
``solbench generate``): each ends as a recorded generation status within the request's
timeout, never a hang, a crash or a candidate lost to a fence the extractor misread."""

from __future__ import annotations

import json
import time

import pytest
from study_server import StudyServer

from solbench.spec.generation import ModelConfig
from solbench.study.client import ChatClient
from solbench.study.extract import extract_code
from solbench.study.generate import GenerateOptions, generate
from solbench.suites import DATA_ROOT

RELU = "relu_fp32"
GOOD = "import torch\n\ndef run(x):\n    return torch.clamp(x, min=0)\n"


def _gen(out, model, client):
    return generate([DATA_ROOT / "l1" / RELU],
                    GenerateOptions(model=model, out=out, temperature=0.0, resume=True), client=client)


def _log(out, model):
    return json.loads((out / RELU / "_gen" / f"{ModelConfig(model, 0.0).label()}.json").read_text())


def test_endless_body_is_a_timeout_within_the_timeout(tmp_path):
    """A 200 whose body trickles in forever (a byte every 50 ms) passes the client's per-read
    timeout; the request's timeout bounds the whole reply. Before: the request hung for the
    whole 60 s stream (and forever on a server that never stops)."""
    out = tmp_path / "sols"
    with StudyServer({("endless", RELU): [("trickle",)]}) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=1.0, retries=1, backoff_s=0.01)
        t0 = time.monotonic()
        res = _gen(out, "endless", client)
        took = time.monotonic() - t0
    assert res.statuses == {"TIMEOUT": 1}
    assert took < 6.0, took  # two attempts of 1 s each, not the 60 s stream
    assert [a.get("error") for a in _log(out, "endless")["answer"]["attempts"]] == \
        ["timeout after 1 s"] * 2


def test_oversized_and_html_replies_are_malformed(tmp_path):
    """A body above ``max_reply_bytes`` is not read further (before: read whole into memory,
    stored whole in the exchange log, 52 MB for a 50 MB reply); an HTML page served with 200
    is MALFORMED_REPLY saying the body is not JSON (before: AttributeError: 'str' object has
    no attribute 'choices')."""
    out = tmp_path / "sols"
    script = {("huge", RELU): [("huge", 2_000_000)], ("html", RELU): [("html",)]}
    with StudyServer(script) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=10.0, retries=0, max_reply_bytes=1 << 20)
        assert _gen(out, "huge", client).statuses == {"MALFORMED_REPLY": 1}
        assert _gen(out, "html", client).statuses == {"MALFORMED_REPLY": 1}
    log = _log(out, "huge")
    assert log["message"] == f"reply over {1 << 20} bytes: not read further"
    assert len(log["answer"]["raw"]) <= 200_000
    log = _log(out, "html")
    assert "JSONDecodeError" in log["message"] and "AttributeError" not in log["message"]
    assert log["answer"]["raw"].startswith("<html>")


def test_extract_four_backtick_fence_and_unlabelled_kernel():
    """A reply with a ```python usage example (no ``run``), the kernel in a ````py fence and
    an identity in an unlabelled block: the kernel is the candidate. Before: NO_CODE (only
    the labelled example was looked at; the ```` fence read as unlabelled)."""
    reply = ("Plan: • fuse 🚀\n\n```python\nx = torch.randn(4)\nprint(run(x))\n```\n\n"
             "````py\n" + GOOD + "# “quotes” ÿ\n````\n\nAnd an alternative:\n```\n"
             "def run(x):\n    return x\n```\n")
    ex = extract_code(reply, "run", "pytorch")
    assert ex.status == "GENERATED"
    assert ex.code == GOOD + "# “quotes” ÿ\n"
    # a tilde fence, and a fence marker inside the code that is not a closing line
    inner = GOOD + 's = """\n```\n"""\n# ``` not a closer\n'
    ex = extract_code("~~~python\n" + inner + "~~~\n", "run", "pytorch")
    assert ex.status == "GENERATED" and ex.code == inner


def test_extract_a_fence_inside_the_code_does_not_cut_it():
    """A reply opening a fence mid-sentence around a decoy, then the real kernel whose comment
    holds ```: the longest block defining ``run`` is the whole kernel (before: the block was
    cut at the comment's ```, and the text after it read as a new block)."""
    reply = ("Note: ```python\ndef run(x):\n    return x\n```\n\nReal answer:\n\n```python\n"
             + GOOD + "# ```\n# ../../ESCAPED.py\nassert True\n```\n")
    ex = extract_code(reply, "run", "pytorch")
    assert ex.status == "GENERATED"
    assert ex.code == GOOD + "# ```\n# ../../ESCAPED.py\nassert True\n"


def test_models_share_a_folder_but_one_configuration_runs_once(tmp_path):
    """A study generates model after model into one folder (``solbench run --solutions`` takes
    one): a second model is no "earlier generation" (before: refused without --resume, whose
    message says "continue it"). Two runs of the same configuration at once are refused while
    the first holds its requests (before: both sent every request and raced on the files)."""
    import threading

    from solbench.errors import SpecError

    out = tmp_path / "sols"
    release = threading.Event()
    script = {("a", RELU): [("reply", f"```python\n{GOOD}```")],
              ("b", RELU): [("block", release, f"```python\n{GOOD}```")]}
    with StudyServer(script) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=20.0, retries=0)
        opts = dict(out=out, temperature=0.0)
        assert generate([DATA_ROOT / "l1" / RELU], GenerateOptions(model="a", **opts),
                        client=client).statuses == {"GENERATED": 1}
        with pytest.raises(SpecError, match="earlier generation of 'a'"):
            generate([DATA_ROOT / "l1" / RELU], GenerateOptions(model="a", **opts), client=client)
        first: dict = {}
        t = threading.Thread(target=lambda: first.update(
            r=generate([DATA_ROOT / "l1" / RELU], GenerateOptions(model="b", **opts), client=client)))
        t.start()
        for _ in range(200):  # until b's request is held by the server
            if srv.count("b", RELU):
                break
            time.sleep(0.05)
        with pytest.raises(SpecError, match="another solbench generate"):
            generate([DATA_ROOT / "l1" / RELU], GenerateOptions(model="b", resume=True, **opts),
                     client=client)
        release.set()
        t.join(30)
    assert first["r"].statuses == {"GENERATED": 1}
    assert srv.count("b", RELU) == 1
    runs = json.loads((out / "study.json").read_text())["runs"]
    assert [r["model"] for r in runs] == ["a", "b"]


def test_agent_binary_output_and_a_left_behind_process(tmp_path):
    """An agent that prints 3 MB of bytes that are not UTF-8 (before: UnicodeDecodeError out
    of generate, a traceback), and one that exits 0 at once with its candidate written but
    leaves a process in a session of its own holding stdout (before: the run waited for the
    timeout, recorded TIMEOUT, then waited for that process too). Both are GENERATED, with
    their output's tail stored."""
    import os
    import signal

    from solbench.study.client import AgentRunner

    pidfile = tmp_path / "left.pid"
    agents = {
        "binary": f"head -c 3000000 /dev/urandom; printf '{GOOD}' > \"$2\"",
        "leaver": f"printf '{GOOD}' > \"$2\"; setsid sleep 30 & echo $! > {pidfile}; echo done",
    }
    out = tmp_path / "sols"
    try:
        for name, body in agents.items():
            script = tmp_path / f"{name}.sh"
            script.write_text("#!/bin/bash\n" + body + "\n")
            script.chmod(0o755)
            t0 = time.monotonic()
            res = generate([DATA_ROOT / "l1" / RELU],
                           GenerateOptions(model=name, out=out, temperature=0.0),
                           agent=AgentRunner(str(script), timeout_s=20.0))
            assert res.statuses == {"GENERATED": 1}, name
            assert time.monotonic() - t0 < 10.0, name
            att = _log(out, name)["answer"]["attempts"][0]
            assert att["returncode"] == 0
            assert len(att["stdout"]) == 20000 if name == "binary" else att["stdout"] == "done\n"
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def test_a_problem_named_with_a_path_is_refused(tmp_path):
    """A definition.json whose ``name`` is ``../../escaped``: generate refuses it, naming the
    file and field, and writes nothing (before: its candidate and exchange were written two
    folders above OUT)."""
    import shutil

    from solbench.errors import SpecError

    src = DATA_ROOT / "l1" / RELU
    prob = tmp_path / "a" / "b" / "p"
    prob.mkdir(parents=True)
    d = json.loads((src / "definition.json").read_text())
    d["name"] = "../../escaped"
    (prob / "definition.json").write_text(json.dumps(d))
    shutil.copy(src / "workload.jsonl", prob / "workload.jsonl")
    out = tmp_path / "a" / "b" / "sols"
    with StudyServer({}) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=5.0, retries=0)
        with pytest.raises(SpecError, match=r"definition\.json.*name"):
            generate([prob], GenerateOptions(model="m", out=out), client=client)
        assert srv.requests == []
    assert not (tmp_path / "a" / "escaped").exists() and not (tmp_path / "escaped").exists()


def test_cli_generate_takes_several_models(tmp_path, monkeypatch):
    """``--model a --model b``: both models' candidates, one after the other, one summary line
    each (before: the last --model silently won, so a study of two models had one)."""
    from typer.testing import CliRunner

    from solbench.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    reply = [("reply", f"```python\n{GOOD}```")]
    out = tmp_path / "sols"
    with StudyServer({("a", RELU): reply, ("b/x y", RELU): reply}) as srv:
        r = CliRunner().invoke(app, ["generate", "l1/relu_fp32", "--model", "a", "--model", "b/x y",
                                     "--model", "a", "--temperature", "0", "-o", str(out),
                                     "--base-url", srv.base_url])
        assert r.exit_code == 0, r.output
        assert srv.count("a", RELU) == 1 and srv.count("b/x y", RELU) == 1
    assert sorted(f.name for f in (out / RELU).glob("*.py")) == ["a@T0.s0.t1.py", "b~x%20y@T0.s0.t1.py"]
    assert [ln.split(":")[0] for ln in r.stdout.splitlines() if "candidates in" in ln] == ["a", "b/x y"]


def test_verify_line_says_why_a_faster_remeasurement_is_not_verified():
    """``not_reproduced (claimed 1.68x, measured 2.1x)`` read as a contradiction; the line now
    gives the low end of the re-measured speedup that decided it, or says no speedup was
    resolved (it printed ``measured -``)."""
    from solbench.study.verify import verdict_line

    rec = {"definition": "p", "solution": "m@T0.s0.t1", "verdict": "not_reproduced",
           "claimed_speedup": 1.68, "verified_speedup": 2.1, "verified_speedup_low": 0.83,
           "workloads": [{"measured": {"status": "PASSED"}}]}
    assert verdict_line(rec) == "p / m@T0.s0.t1: not_reproduced (claimed 1.68x, measured 2.1x, low end 0.83x)"
    rec.update(verified_speedup=None, verified_speedup_low=None)
    assert verdict_line(rec) == ("p / m@T0.s0.t1: not_reproduced (claimed 1.68x, measured -: "
                                 "a workload's speedup is not resolved)")
    rec.update(verdict="verified", verified_speedup=1.5, verified_speedup_low=1.2)
    assert verdict_line(rec).endswith("verified (claimed 1.68x, measured 1.5x, low end 1.2x)")


def test_a_model_name_too_long_for_a_file_name_is_one_line(tmp_path):
    """A 300-character model name: refused before any request, naming --model (before: the
    lock or the exchange write failed with 'File name too long' on a path, after the request
    was sent when it came from the exchange)."""
    from solbench.errors import SpecError

    with StudyServer({}) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=5.0, retries=0)
        with pytest.raises(SpecError, match="--model.*too long for a file name"):
            generate([DATA_ROOT / "l1" / RELU], GenerateOptions(model="x" * 300, out=tmp_path / "o"),
                     client=client)
        assert srv.requests == []
    assert not (tmp_path / "o").exists()



def test_run_takes_no_candidate_from_outside_the_solutions_folder(tmp_path):
    import shutil

    from solbench.spec import load_problem
    from solbench.run.plan import candidate_files

    src = DATA_ROOT / "l1" / RELU
    prob = tmp_path / "p"
    prob.mkdir()
    d = json.loads((src / "definition.json").read_text())
    d["name"] = "../outside"
    (prob / "definition.json").write_text(json.dumps(d))
    shutil.copy(src / "workload.jsonl", prob / "workload.jsonl")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "planted.py").write_text(GOOD)
    (tmp_path / "sols").mkdir()
    assert candidate_files(tmp_path / "sols", load_problem(prob)) == []
