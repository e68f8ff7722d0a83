import pytest


@pytest.fixture(autouse=True)
def _private_key_dir(tmp_path, monkeypatch):
    """Each test gets its own trace key folder (never the user's real key)."""
    d = tmp_path / "solbench-data"
    monkeypatch.setenv("SOLBENCH_DATA_DIR", str(d))
    monkeypatch.delenv("SOLBENCH_TRACE_KEYS", raising=False)
    import solbench.store as store

    store._RUNS.clear()
    return d
