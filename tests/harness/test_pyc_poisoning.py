"""A candidate runs as the same user as solbench, so it can write into solbench's cache. A
planted ``.pyc`` (valid header: the real source's mtime and size) must not change the code
that the trusted parent runs as the reference, nor the code a later worker runs for another
solution (the eager reference's timing worker included). Both load from the text they hold."""

import importlib.util
import os
import py_compile
import sys

from solbench.harness.build import load_entry, solution_dir
from solbench.spec import Solution
from solbench.spec import reference as R

GOOD = "import torch\n\ndef run(x):\n    return x + 1\n"
EVIL = "import torch\n\ndef run(x):\n    return x * 0\n"  # same length as GOOD


def _plant_pyc(py_path, evil_text):
    """Write a .pyc for ``py_path`` compiled from ``evil_text`` whose header matches the real
    file's mtime and size, where the import system looks for it."""
    assert len(evil_text) == len(py_path.read_text())
    st = os.stat(py_path)
    evil = py_path.with_name("evil_src.py")
    evil.write_text(evil_text)
    os.utime(evil, ns=(st.st_atime_ns, st.st_mtime_ns))
    target = importlib.util.cache_from_source(str(py_path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    py_compile.compile(str(evil), cfile=target, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    return target


def test_plain_import_would_be_fooled(tmp_path):
    """The attack is real: the standard import system runs the planted bytecode."""
    p = tmp_path / "mod_x.py"
    p.write_text(GOOD)
    _plant_pyc(p, EVIL)
    spec = importlib.util.spec_from_file_location("mod_x_fooled", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.run(1) == 0


def test_parent_reference_ignores_planted_pyc(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(sys, "pycache_prefix", None)
    R._CACHE.clear()
    mod = R.import_source(GOOD, "poison_target")
    path = mod.__file__
    R._CACHE.clear()
    _plant_pyc(__import__("pathlib").Path(path), EVIL)
    mod2 = R.import_source(GOOD, "poison_target")
    assert mod2.run(1) == 2


def test_worker_import_ignores_planted_pyc(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    sol = Solution.model_validate({
        "name": "good", "definition": "d", "author": "t",
        "spec": {"languages": ["pytorch"], "entry_point": "k.py::run",
                 "destination_passing_style": False},
        "sources": [{"path": "k.py", "content": GOOD}]})
    d = solution_dir(sol)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    _plant_pyc(d / "k.py", EVIL)
    fn, info = load_entry(sol, "cpu", (), 0, 60.0)
    assert fn(1) == 2


def test_code_that_reads_its_own_source_still_works(tmp_path, monkeypatch):
    """triton.jit reads the decorated function's source with inspect at decoration time; a
    module compiled from memory must still give it (and a helper module imported by name)."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    entry = ("import inspect\nimport helper_mod\n\n"
             "def jit(fn):\n"
             "    fn.src = inspect.getsource(fn)\n"
             "    fn.file = inspect.getsourcefile(fn)\n"
             "    return fn\n\n"
             "@jit\ndef kernel(x):\n    return helper_mod.twice(x)\n\n"
             "def run(x):\n    return kernel(x)\n")
    sol = Solution.model_validate({
        "name": "reads_source", "definition": "d", "author": "t",
        "spec": {"languages": ["pytorch"], "entry_point": "k.py::run",
                 "destination_passing_style": False},
        "sources": [{"path": "k.py", "content": entry},
                    {"path": "helper_mod.py", "content": "def twice(x):\n    return 2 * x\n"}]})
    fn, _ = load_entry(sol, "cpu", (), 0, 60.0)
    assert fn(3) == 6
    mod = sys.modules[fn.__module__]
    assert mod.kernel.src.startswith("@jit\ndef kernel(x):")
    assert mod.kernel.file.endswith("k.py")
