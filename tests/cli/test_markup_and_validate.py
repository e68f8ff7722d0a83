"""Issue 35 items 8 and 9 on the CLI as a user runs it (``python -m solbench.cli``): help text
and validation messages print every ``[...]`` as written; ``solbench validate`` checks the
reference's ``run`` signature against the definition's inputs, statically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import solbench


def _cli(*args, cwd=None):
    src = str(Path(solbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "solbench.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_help_text_keeps_brackets():
    r = _cli("run", "--help")
    assert r.returncode == 0 and "pip install 'solbench[ray]'" in r.stdout
    r = _cli("baseline", "--help")
    assert r.returncode == 0 and '{"solutions": [paths]}' in r.stdout
    assert "\\[" not in r.stdout


def test_validate_messages_keep_brackets(tmp_path):
    d = tmp_path / "p[draft]"
    d.mkdir()
    (d / "definition.json").write_text("{not json")
    r = _cli("validate", str(d))
    assert r.returncode == 1 and f"{d}/definition.json" in r.stderr


def _problem(root: Path, inputs: list[str], signature: str, name: str = "sig") -> Path:
    d = root / name
    d.mkdir()
    body = " + ".join(p.split("=")[0].strip().lstrip("*") for p in signature.split(",")[:1])
    (d / "definition.json").write_text(json.dumps({
        "name": name, "axes": {},
        "inputs": {k: {"shape": [4], "dtype": "float32"} for k in inputs},
        "outputs": {"z": {"shape": [4], "dtype": "float32"}},
        "reference": f"import torch\n\ndef run({signature}):\n    return {body} * 1\n"}))
    (d / "workload.jsonl").write_text(json.dumps(
        {"uuid": "w0", "axes": {}, "inputs": {k: {"type": "random"} for k in inputs}}) + "\n")
    return d


@pytest.mark.parametrize("inputs,signature,says", [
    (["x"], "inp", "run(inp) does not match the definition's inputs (x): parameter 1 is 'inp', input 1 is 'x'"),
    (["a", "b"], "b, a", "run(b, a) names the inputs (a, b) in another order"),
    (["x", "y"], "x", "run(x) takes 1 positional parameter(s), the definition has 2 inputs (x, y)"),
    (["x"], "x, scale", "run(x, scale) has parameter(s) scale beyond the inputs (x) without a default"),
    (["x"], "x, *, eps", "keyword-only parameter(s) eps without a default"),
])
def test_validate_rejects_a_run_signature_unlike_the_inputs(tmp_path, inputs, signature, says):
    d = _problem(tmp_path, inputs, signature)
    r = _cli("validate", str(d))
    assert r.returncode == 1, r.stdout + r.stderr
    line = r.stderr.strip()
    assert line.startswith(f"INVALID {d}/definition.json: reference: run(") and says in line, line


@pytest.mark.parametrize("inputs,signature", [
    (["x", "y"], "x, y"), (["x"], "x, scale=2.0"), (["x", "y"], "*args"), (["x", "y"], "x, *rest"),
    (["x"], "x, *, eps=1e-6"), (["x"], "x, /"),
])
def test_validate_accepts_a_matching_run_signature(tmp_path, inputs, signature):
    from solbench.spec import load_problem
    from solbench.spec.problem import reference_signature_issue

    d = _problem(tmp_path, inputs, signature)
    assert reference_signature_issue(load_problem(d).definition) is None
    r = _cli("validate", str(d))
    assert r.returncode == 0, r.stderr


def test_every_bundled_and_dev_reference_matches_its_inputs():
    """The check holds for every real problem we have (174 with ../shared; the bundled suites
    without): a rule that rejected upstream problems would be wrong, not they."""
    from solbench.spec import load_problem
    from solbench.spec.problem import reference_signature_issue

    roots = [Path(solbench.__file__).parent / "suites" / "data"]
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
    roots += [shared / "sol-execbench-dev", shared / "upstream-examples"]
    n = 0
    for root in roots:
        for defn in sorted(root.rglob("definition.json")) if root.is_dir() else []:
            try:
                p = load_problem(defn.parent)
            except Exception:  # noqa: BLE001 - other checks' business
                continue
            n += 1
            assert reference_signature_issue(p.definition) is None, defn
    assert n >= 100


def test_every_option_of_every_command_says_what_it_does():
    """A new user reads ``solbench X --help``: an option listed without a word (``compare
    --include-unverified`` was) leaves them guessing. Walks the click tree, no subprocess."""
    from solbench.cli import command

    bare = []

    def walk(cmd, path):
        for p in cmd.params:
            if getattr(p, "param_type_name", None) == "option" and not (p.help or "").strip():
                bare.append(f"{path} {p.opts[0]}")
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(command(), "solbench")
    assert bare == []


def test_validate_takes_an_extract_output_folder_as_written(tmp_path):
    """``solbench extract -o DIR`` writes problem directories and DIR/extract_report.json;
    ``solbench validate DIR`` read that report as a solution.json and called it INVALID
    ("name: Field required (and 6 more errors)") although every problem was valid and
    ``solbench run DIR`` took the folder as is."""
    import shutil

    from solbench.cli.validate import validate_path

    shutil.copytree(Path(solbench.__file__).parent / "suites" / "data" / "l1" / "relu_fp32",
                    tmp_path / "001_relu")
    (tmp_path / "extract_report.json").write_text(json.dumps({"model": "hf:llama", "written": ["001_relu"],
                                                             "failed": []}))
    res = validate_path(tmp_path)
    assert [ok for ok, _ in res] == [True], res
    # a solution.json beside it is still checked
    (tmp_path / "sol").mkdir()
    (tmp_path / "sol" / "solution.json").write_text("{}")
    assert [ok for ok, _ in validate_path(tmp_path)] == [True, False]


def test_readme_names_every_command():
    """A new user learns the CLI from README.md alone: every top-level command appears there
    as ``solbench <command>`` (``compare``, ``results`` and ``selftest`` did not)."""
    import re

    from solbench.cli import command

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    missing = [c for c in sorted(command().commands) if not re.search(rf"solbench {re.escape(c)}\b", readme)]
    assert missing == []


def test_readme_eval_line_lists_hardware_and_spare_workers():
    """README's usage line for ``solbench eval`` names the options a new user needs to choose
    the SOL hardware (``--hardware``: without a GPU name there is no SOL score) and the
    workers started ahead (``--spare-workers``); both are options of ``solbench eval``."""
    from solbench.cli import command

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("solbench eval PROBLEM"))
    opts = {o for p in command().commands["eval"].params for o in p.opts}
    for opt in ("--hardware", "--spare-workers"):
        assert opt in opts
        assert f"[{opt} " in line, (opt, line)
