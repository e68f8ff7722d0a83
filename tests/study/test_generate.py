"""solbench generate against a real OpenAI-compatible server on loopback (tests/study/study_server.py):
every kind of reply ends as a recorded status and a candidate file that `solbench run` takes;
retries, timeouts, the exchange log, resume without asking twice, the agent command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from study_server import StudyServer

from solbench.spec import load_problem
from solbench.spec.generation import ModelConfig, model_from_slug, model_slug, parse_label
from solbench.study.client import AgentRunner, ChatClient
from solbench.study.extract import extract_code
from solbench.study.generate import GenerateOptions, generate, resolve_targets
from solbench.suites import DATA_ROOT
from solbench.run.plan import candidate_files, load_candidate

RELU, SUM = "relu_fp32", "sum_dim1_fp32"
GOOD_RELU = "Here it is:\n```python\nimport torch\n\ndef run(x):\n    return torch.clamp(x, min=0)\n```\n"
WRONG_RELU = "```python\nimport torch\n\ndef run(x):\n    return torch.relu(x) * 1.01\n```"
GOOD_SUM = "```python\nimport torch\n\ndef run(x):\n    return x.sum(dim=1)\n```"
BROKEN_SUM = "```python\nimport torch\n\ndef run(x):\n    return x.sum(dim=1\n```"


def problems():
    return [DATA_ROOT / "l1" / RELU, DATA_ROOT / "l1" / SUM]


def test_label_round_trip():
    cfg = ModelConfig("meta-llama/Llama-3.1-8B~x y", 0.7, sample=2, turn=3)
    lab = cfg.label()
    assert "/" not in lab and " " not in lab
    assert lab.endswith("@T0.7.s2.t3")
    assert parse_label(lab) == cfg
    assert model_from_slug(model_slug("a/b~c%d")) == "a/b~c%d"
    assert parse_label(ModelConfig("m", None).label()) == ModelConfig("m", None, 0, 1)
    assert parse_label("eager") is None and parse_label("triton") is None
    with pytest.raises(ValueError):
        ModelConfig("m", 3.0).label()


def test_extract_code_cases():
    assert extract_code(GOOD_RELU, "run", "pytorch").status == "GENERATED"
    assert extract_code("I cannot help with that.", "run", "pytorch").status == "NO_CODE"
    ex = extract_code(BROKEN_SUM, "run", "pytorch")
    assert ex.status == "SYNTAX_ERROR" and ex.message == "line 4: '(' was never closed"
    # a block that does not define the entry is no candidate
    assert extract_code("```python\nx = 1\n```", "run", "pytorch").status == "NO_CODE"
    # ModelNew contract for KernelBench problems
    kb = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```"
    assert extract_code(kb, "ModelNew", "cuda").status == "GENERATED"
    assert extract_code(kb, "run", "pytorch").status == "NO_CODE"
    cu = "```cuda\n#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n```"
    assert extract_code(cu, "run", "cuda").code.startswith("#include")


def _opts(out, model, **kw):
    return GenerateOptions(model=model, out=out, temperature=0.0, **kw)


def test_every_reply_kind_is_a_recorded_status(tmp_path):
    script = {
        ("good", RELU): [("reply", GOOD_RELU)],
        ("good", SUM): [("reply", GOOD_SUM)],
        ("bad", RELU): [("reply", WRONG_RELU)],
        ("bad", SUM): [("reply", "Sorry, I can only describe the approach in words.")],
        ("flaky", RELU): [("status", 429), ("status", 503), ("reply", GOOD_RELU)],
        ("flaky", SUM): [("malformed",)],
        ("slow", RELU): [("slow", 3.0, GOOD_RELU)],
        ("slow", SUM): [("reply", BROKEN_SUM)],
    }
    out = tmp_path / "sols"
    with StudyServer(script) as srv:
        client = ChatClient(srv.base_url, "k", timeout_s=1.0, retries=2, backoff_s=0.01)
        results = {m: generate(problems(), _opts(out, m, resume=True), client=client)
                   for m in ("good", "bad", "flaky", "slow")}
    assert results["good"].statuses == {"GENERATED": 2}
    assert results["bad"].statuses == {"GENERATED": 1, "NO_CODE": 1}
    assert results["flaky"].statuses == {"GENERATED": 1, "MALFORMED_REPLY": 1}
    assert results["slow"].statuses == {"TIMEOUT": 1, "SYNTAX_ERROR": 1}
    # requests: the 429 and the 503 were retried (3 for flaky relu); the timeout 3 times (retries=2)
    assert srv.count("flaky", RELU) == 3 and results["flaky"].requests == 4
    assert srv.count("slow", RELU) == 3
    # token usage as the server reported it: completion tokens = len(text) // 4
    assert results["good"].completion_tokens == len(GOOD_RELU) // 4 + len(GOOD_SUM) // 4

    lab = {m: ModelConfig(m, 0.0).label() for m in ("good", "bad", "flaky", "slow")}
    relu, summ = (load_problem(p) for p in problems())
    # every (problem, model) has exactly one candidate the runner takes, named by its label
    for prob in (relu, summ):
        files = candidate_files(out, prob)
        assert sorted(f.stem for f in files) == sorted(lab.values())
    # the candidates: code where there was code, a generation error the runner reports otherwise
    assert (out / RELU / f"{lab['good']}.py").read_text().strip().endswith("torch.clamp(x, min=0)")
    c = load_candidate(out / SUM / f"{lab['bad']}.json", summ)
    assert c.solution is None and c.load_error.startswith("generation failed: NO_CODE")
    c = load_candidate(out / SUM / f"{lab['flaky']}.json", summ)
    assert c.load_error.startswith("generation failed: MALFORMED_REPLY")
    c = load_candidate(out / RELU / f"{lab['slow']}.json", relu)
    assert c.load_error.startswith("generation failed: TIMEOUT")
    c = load_candidate(out / SUM / f"{lab['slow']}.py", summ)
    assert c.solution is None and "syntax error" in c.load_error
    # the exchange is stored beside the candidate: request, attempts, raw reply
    log = json.loads((out / RELU / "_gen" / f"{lab['flaky']}.json").read_text())
    assert [a.get("http_status") for a in log["answer"]["attempts"]] == [429, 503, 200]
    assert log["request"]["model"] == "flaky" and log["request"]["temperature"] == 0.0
    assert "Implement the operation `relu_fp32`" in log["request"]["messages"][1]["content"]
    assert log["answer"]["content"] == GOOD_RELU
    log = json.loads((out / SUM / "_gen" / f"{lab['flaky']}.json").read_text())
    assert log["status"] == "MALFORMED_REPLY" and log["answer"]["raw"].startswith('{"id": "x"')


def test_resume_never_asks_twice_after_a_kill(tmp_path):
    """A generate process killed while its third request is in flight: resumed, it asks only
    that one again (the server counts the requests)."""
    release = threading.Event()
    script = {("m", RELU): [("reply", GOOD_RELU)], ("m", SUM): [("block", release, GOOD_SUM)]}
    out = tmp_path / "sols"
    with StudyServer(script) as srv:
        code = textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from solbench.study.client import ChatClient
            from solbench.study.generate import GenerateOptions, generate
            paths = [Path(p) for p in {[str(p) for p in problems()]!r}]
            generate(paths, GenerateOptions(model="m", out=Path({str(out)!r}), samples=2,
                     concurrency=1, temperature=0.5), client=ChatClient({srv.base_url!r}, "k", retries=0))
        """)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
        p = subprocess.Popen([sys.executable, "-c", code], env=env)
        try:
            deadline = time.time() + 60
            while srv.count("m", SUM) < 1 and time.time() < deadline:  # relu x2 answered, sum in flight
                time.sleep(0.05)
            assert srv.count("m", SUM) == 1 and srv.count("m", RELU) == 2
        finally:
            p.kill()
            p.wait()
        release.set()
        assert (out / RELU / f"{ModelConfig('m', 0.5, 1).label()}.py").is_file()
        with pytest.raises(Exception, match="--resume"):
            generate(problems(), GenerateOptions(model="m", out=out, samples=2, temperature=0.5),
                     client=ChatClient(srv.base_url, "k"))
        res = generate(problems(), GenerateOptions(model="m", out=out, samples=2, temperature=0.5,
                                                    resume=True), client=ChatClient(srv.base_url, "k"))
        # relu's two replies were stored: not asked again; sum's two asked once each now
        assert srv.count("m", RELU) == 2
        assert srv.count("m", SUM) == 1 + 2
        assert res.resumed == 2 and res.requests == 2 and res.statuses == {"GENERATED": 4}
        again = generate(problems(), GenerateOptions(model="m", out=out, samples=2, temperature=0.5,
                                                     resume=True), client=ChatClient(srv.base_url, "k"))
        assert again.requests == 0 and again.resumed == 4 and len(srv.requests) == 5


AGENT = """\
import os, sys
from pathlib import Path
problem, solution = Path(sys.argv[1]), Path(sys.argv[2])
assert os.environ["SOLBENCH_SOLUTION"] == str(solution)
if problem.name == "relu_fp32":
    solution.write_text("import torch\\n\\ndef run(x):\\n    return torch.clamp(x, min=0)\\n")
elif os.environ.get("SOLBENCH_HANG"):
    import time; time.sleep(60)
else:
    print("giving up on", problem.name, file=sys.stderr)
    sys.exit(3)
"""


def test_agent_command(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    out = tmp_path / "sols"
    agent = AgentRunner(f"{sys.executable} {script}", timeout_s=30)
    res = generate(problems(), GenerateOptions(model="my-agent", out=out), agent=agent)
    assert res.statuses == {"GENERATED": 1, "AGENT_ERROR": 1}
    lab = ModelConfig("my-agent", None).label()
    assert (out / RELU / f"{lab}.py").read_text().startswith("import torch")
    log = json.loads((out / SUM / "_gen" / f"{lab}.json").read_text())
    assert log["answer"]["attempts"][0]["returncode"] == 3
    assert "giving up on sum_dim1_fp32" in log["answer"]["attempts"][0]["stderr"]
    assert load_candidate(out / SUM / f"{lab}.json", load_problem(problems()[1])).load_error == \
        "generation failed: AGENT_ERROR: agent exited with status 3: giving up on sum_dim1_fp32"
    # an agent past its timeout is killed and recorded
    os.environ["SOLBENCH_HANG"] = "1"
    try:
        t0 = time.time()
        res = generate([problems()[1]], GenerateOptions(model="hang", out=tmp_path / "h"),
                       agent=AgentRunner(f"{sys.executable} {script}", timeout_s=1))
    finally:
        del os.environ["SOLBENCH_HANG"]
    assert res.statuses == {"TIMEOUT": 1} and time.time() - t0 < 20


KB_RELU = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n"
           "def get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n")
KB_REPLY = ("```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        return torch.clamp(x, min=0)\n```")


def test_kernelbench_folder_generate_then_run_plan(tmp_path):
    """A folder of KernelBench files is a target of generate and of run; the ModelNew
    candidates land where run's plan finds them."""
    from solbench.suites import resolve_suite_or_dir
    from solbench.run.plan import plan_run

    kb = tmp_path / "level1"
    kb.mkdir()
    (kb / "19_ReLU.py").write_text(KB_RELU)
    (kb / "_helpers.py").write_text("class Model: pass\n")  # skipped: starts with _
    (kb / "notes.py").write_text("x = 1\n")  # skipped: no Model
    assert [p.name for p in resolve_suite_or_dir(kb)] == ["19_ReLU.py"]
    assert resolve_targets([str(kb), "l1/relu_fp32"])[0].name == "19_ReLU.py"
    assert len(resolve_targets([str(kb), str(kb / "19_ReLU.py")])) == 1
    out = tmp_path / "sols"
    # the KernelBench prompt carries the file, not a backquoted name: script it under "?"
    with StudyServer({("m", "?"): [("reply", KB_REPLY)]}) as srv:
        res = generate([kb / "19_ReLU.py"], GenerateOptions(model="m", out=out), client=ChatClient(srv.base_url, "k"))
    assert res.statuses == {"GENERATED": 1}
    assert "class Model(torch.nn.Module)" in srv.requests[0][2]["messages"][1]["content"]
    plan = plan_run(resolve_suite_or_dir(kb), out, set())
    (pair,) = plan.pairs
    assert pair.candidate.label == ModelConfig("m", None).label()
    assert pair.candidate.solution.spec.entry_point.endswith("::ModelNew")


def test_prompts_in_the_style_of_the_source(tmp_path):
    from solbench.study.prompts import feedback_message, initial_messages

    kb = tmp_path / "19_ReLU.py"
    src = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n"
           "def get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n")
    kb.write_text(src)
    sysm, user = initial_messages(load_problem(kb), "cuda")
    assert sysm["role"] == "system" and src.rstrip() in user["content"]
    assert "`ModelNew`" in user["content"] and "load_inline" in user["content"]
    _, user = initial_messages(load_problem(DATA_ROOT / "l1" / SUM), "triton")
    c = user["content"]
    assert "`run(x)`" in c and "@triton.jit" in c and "torch.sum(x, dim=1)" in c
    j = c.index("```json\n") + 8
    d = json.loads(c[j:c.index("\n```", j)])  # the definition, as JSON, without its reference
    assert d["name"] == SUM and d["inputs"]["x"]["shape"] == ["B", "R", "C"] and "reference" not in d
    _, user = initial_messages(load_problem(DATA_ROOT / "l1" / SUM), "cuda")
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" in user["content"]
    fb = feedback_message("workload (B=4): INCORRECT_NUMERICAL", "round 0: tolerance")
    assert "INCORRECT_NUMERICAL" in fb["content"] and "round 0: tolerance" in fb["content"]


def test_wrong_model_stops_the_run_and_records_nothing(tmp_path):
    """HTTP 404 (no such model) is the run's configuration: one error, no failure recorded per
    problem (a resumed run with the right name asks every problem)."""
    from solbench.study.client import EndpointError

    out = tmp_path / "sols"
    with StudyServer({("m", RELU): [("reply", GOOD_RELU)], ("m", SUM): [("reply", GOOD_SUM)]}) as srv:
        with pytest.raises(EndpointError, match="HTTP 404"):
            generate(problems(), GenerateOptions(model="typo", out=out, concurrency=1),
                     client=ChatClient(srv.base_url, "k"))
        assert not list(out.glob("*/_gen/*.json")) and len(srv.requests) == 1
        res = generate(problems(), GenerateOptions(model="m", out=out), client=ChatClient(srv.base_url, "k"))
    assert res.statuses == {"GENERATED": 2}


def test_concurrency_is_bounded(tmp_path):
    script = {("m", RELU): [("slow", 0.3, GOOD_RELU)], ("m", SUM): [("slow", 0.3, GOOD_SUM)]}
    with StudyServer(script) as srv:
        res = generate(problems(), GenerateOptions(model="m", out=tmp_path / "s", samples=3, concurrency=2),
                       client=ChatClient(srv.base_url, "k"))
    assert res.statuses == {"GENERATED": 6}
    assert srv.max_in_flight == 2


def test_cli_errors_are_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from solbench.cli import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    r = CliRunner().invoke(app, ["generate", "l1/relu_fp32", "--model", "m", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "OPENAI_API_KEY is not set" in r.output
    r = CliRunner().invoke(app, ["generate", "l1/relu_fp32", "--model", "m", "-o", str(tmp_path / "o"),
                                 "--agent-cmd", "x", "--base-url", "http://127.0.0.1:1/v1"])
    assert r.exit_code == 2 and "exclude each other" in r.output
    r = CliRunner().invoke(app, ["generate", "no_such_suite", "--model", "m", "-o", str(tmp_path / "o"),
                                 "--base-url", "http://127.0.0.1:1/v1"])
    assert r.exit_code == 2 and "no such suite" in r.output
    r = CliRunner().invoke(app, ["generate", "l1/relu_fp32", "--model", "m", "-o", str(tmp_path / "o"),
                                 "--base-url", "http://127.0.0.1:1/v1", "--language", "fortran"])
    assert r.exit_code == 2 and "--language" in r.output
