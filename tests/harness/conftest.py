"""Fixtures of the harness tests: a private solbench cache for the worker processes."""

import pytest


@pytest.fixture(scope="session")
def solbench_cache(tmp_path_factory):
    """A private solbench cache (generated reference files, solution dirs, C++ builds); the
    worker processes inherit it through the environment."""
    d = tmp_path_factory.mktemp("solbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOLBENCH_CACHE", str(d))
        yield d


@pytest.fixture
def unsandboxed(monkeypatch):
    """Workers without the OS sandbox (SOLBENCH_SANDBOX=off): for tests of the second line
    of defence (the parent's process and scheduling checks), which a sandboxed candidate
    never reaches because it cannot see the reference worker at all (test_sandbox.py)."""
    monkeypatch.setenv("SOLBENCH_SANDBOX", "off")
