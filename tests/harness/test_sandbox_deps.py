"""The worker imports solbench's dependencies from wherever this process does: a folder of
wheels installed with ``pip install --target DIR`` and put on PYTHONPATH (as on a machine with
no package registry) is part of the Python installation. Before, the allow-list sandbox and
environment gave the worker the package root alone, and on such a machine every worker died
importing pydantic (RUNTIME_ERROR for every candidate, the reference included). A folder on
the import path that holds no installed distribution stays hidden."""

from __future__ import annotations

import json
import sys

import pytest

from solbench.harness import sandbox


def _site(tmp_path, name: str):
    d = tmp_path / "site"
    (d / name).mkdir(parents=True)
    (d / name / "__init__.py").write_text("MAGIC = 41 + 1\n")
    (d / f"{name}-1.0.dist-info").mkdir()
    (d / f"{name}-1.0.dist-info" / "METADATA").write_text(f"Name: {name}\nVersion: 1.0\n")
    return d


def test_folders_of_installed_distributions_on_the_import_path_are_shown(tmp_path, monkeypatch):
    site = _site(tmp_path, "solbench_dep_probe")
    project = tmp_path / "project"
    project.mkdir()
    (project / "results.jsonl").write_text("{}\n")
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.syspath_prepend(str(site))
    got = sandbox.installed_import_paths()
    assert str(site.resolve()) in got
    assert str(project.resolve()) not in got
    assert str(site.resolve()) in sandbox.code_paths()


@pytest.mark.slow
def test_a_candidate_imports_a_dependency_installed_with_target(tmp_path, monkeypatch):
    from solbench.harness import EvalConfig, evaluate
    from solbench.spec import load_problem
    from solbench.spec.trace import Status

    site = _site(tmp_path, "solbench_dep_probe")
    monkeypatch.syspath_prepend(str(site))
    d = tmp_path / "p"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps({
        "name": "p", "axes": {}, "inputs": {"x": {"shape": [64], "dtype": "float32"}},
        "outputs": {"y": {"shape": [64], "dtype": "float32"}},
        "reference": "import torch\ndef run(x):\n    return x * 42\n"}))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "w0", "axes": {}, "inputs": {"x": {"type": "random"}}}) + "\n")
    cand = tmp_path / "cand.py"
    cand.write_text("import solbench_dep_probe\ndef run(x):\n    return x * solbench_dep_probe.MAGIC\n")
    from solbench.spec import load_solution

    p = load_problem(d)
    (t,) = evaluate(p, load_solution(cand, p), EvalConfig(device="cpu", iters=3, rounds=2, timing=False))
    assert t.evaluation.status == Status.PASSED, t.evaluation.log[-800:]
