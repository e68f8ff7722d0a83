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
