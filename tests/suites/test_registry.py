"""Suite registry: discovery, errors, resolve_suite_or_dir; every bundled problem loads."""

import json
import shutil
from pathlib import Path

import pytest

from solbench.errors import SpecError
from solbench.spec import load_problem
from solbench.suites import DATA_ROOT, list_suites, resolve_suite_or_dir, suite_problems

L1_ROOT = DATA_ROOT / "l1"


def _copy_problem(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    shutil.copy(src / "definition.json", dst / "definition.json")
    shutil.copy(src / "workload.jsonl", dst / "workload.jsonl")


def test_discovery_on_a_made_up_tree(tmp_path):
    relu = L1_ROOT / "relu_fp32"
    _copy_problem(relu, tmp_path / "alpha" / "p1")
    _copy_problem(L1_ROOT / "gelu_fp32", tmp_path / "alpha" / "p2")
    _copy_problem(relu, tmp_path / "beta" / "q")
    (tmp_path / "empty").mkdir()  # no problem: not a suite
    (tmp_path / "alpha" / "notes").mkdir()  # no definition.json: not a problem
    suites = list_suites(tmp_path)
    assert [s.name for s in suites] == ["alpha", "beta"]
    n_relu = len((relu / "workload.jsonl").read_text().splitlines())
    n_gelu = len((L1_ROOT / "gelu_fp32" / "workload.jsonl").read_text().splitlines())
    assert suites[0].problems == 2 and suites[0].workloads == n_relu + n_gelu
    assert suites[0].cpu_workloads == 2
    assert [p.name for p in suite_problems("alpha", tmp_path)] == ["p1", "p2"]
    with pytest.raises(SpecError, match="known suites: alpha, beta"):
        suite_problems("gamma", tmp_path)
    with pytest.raises(SpecError):
        suite_problems("empty", tmp_path)
    # resolve: suite name, problem dir, definition.json, dir of problems, dir of suites
    assert [p.name for p in resolve_suite_or_dir("beta", tmp_path)] == ["q"]
    assert resolve_suite_or_dir(tmp_path / "alpha" / "p1") == [tmp_path / "alpha" / "p1"]
    assert resolve_suite_or_dir(tmp_path / "beta" / "q" / "definition.json") == [tmp_path / "beta" / "q"]
    assert [p.name for p in resolve_suite_or_dir(tmp_path / "alpha")] == ["p1", "p2"]
    assert [p.name for p in resolve_suite_or_dir(tmp_path)] == ["p1", "p2", "q"]
    with pytest.raises(SpecError, match="holds no problem"):
        resolve_suite_or_dir(tmp_path / "empty")


def test_a_missing_path_is_named_as_a_missing_path(tmp_path):
    """``solbench sol ../data/L1/00x`` with a typo: the path is missing, not a suite; a bare
    unknown name is still an unknown suite with the known ones listed."""
    _copy_problem(L1_ROOT / "relu_fp32", tmp_path / "alpha" / "p1")
    _copy_problem(L1_ROOT / "relu_fp32", tmp_path / "beta" / "q")
    missing = tmp_path / "alpha" / "p9"
    with pytest.raises(SpecError, match="no such file or directory .*known suites: alpha, beta") as e:
        resolve_suite_or_dir(missing, tmp_path)
    assert str(missing) in str(e.value) and "no such suite" not in str(e.value)
    with pytest.raises(SpecError, match="no such suite \\(known suites: alpha, beta\\)"):
        resolve_suite_or_dir("gamma", tmp_path)


def test_bundled_suites_listed_and_every_problem_validates():
    suites = {s.name: s for s in list_suites()}
    assert "l1" in suites
    for s in suites.values():
        paths = suite_problems(s.name)
        assert len(paths) == s.problems
        total = 0
        for p in paths:
            prob = load_problem(p)  # raises SpecError naming the file and field if invalid
            assert prob.name == p.name, "problem folder must be named after the definition"
            total += len(prob.workloads)
            assert any("cpu" in (w.tags or []) for w in prob.workloads), f"{p.name}: no cpu workload"
        assert total == s.workloads


def test_suite_list_cli_json():
    from typer.testing import CliRunner

    from solbench.cli import app

    r = CliRunner().invoke(app, ["suite", "list", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    got = {d["name"]: (d["problems"], d["workloads"]) for d in data["suites"]}
    assert got == {s.name: (s.problems, s.workloads) for s in list_suites()}


def test_a_suite_name_beside_a_folder_of_that_name_without_problems_is_the_suite(tmp_path, monkeypatch):
    """``solbench run l1`` in a folder that holds a results folder ``l1/``: the bundled suite
    (the folder holds no problem); a folder of that name that holds problems is the folder, and
    a path (with a separator) to an empty folder is still an error."""
    _copy_problem(L1_ROOT / "relu_fp32", tmp_path / "suites" / "alpha" / "p1")
    work = tmp_path / "work"
    (work / "alpha").mkdir(parents=True)
    (work / "alpha" / "results.jsonl").write_text("")
    monkeypatch.chdir(work)
    assert resolve_suite_or_dir("alpha", tmp_path / "suites") == [tmp_path / "suites" / "alpha" / "p1"]
    with pytest.raises(SpecError, match="holds no problem"):
        resolve_suite_or_dir("./alpha", tmp_path / "suites")
    _copy_problem(L1_ROOT / "gelu_fp32", work / "alpha" / "mine")
    assert resolve_suite_or_dir("alpha", tmp_path / "suites") == [Path("alpha") / "mine"]
