"""The child-process allow-list of the harness guards: runtime helpers by program or by the
real location of the script, never by a name that merely appears on the command line."""
import os
import sys

import torch

from solbench.harness.guards import _allowed

TORCH_DIR = os.path.dirname(torch.__file__)
WORKER_MAIN = os.path.join(TORCH_DIR, "_inductor", "compile_worker", "__main__.py")


def test_inductor_compile_worker_started_as_a_script_is_allowed():
    # the command line torch 2.11's SubprocPool uses (seen on the H200 run of 2026-11-30)
    cmd = (f"{sys.executable} {WORKER_MAIN} --pickler=torch._inductor.compile_worker."
           "subproc_pool.SubprocPickler --kind=fork -")
    assert _allowed(cmd)
    assert _allowed(f"{sys.executable} -m torch._inductor.compile_worker --workers=2")


def test_lookalike_scripts_and_mentions_are_not_allowed(tmp_path):
    fake = tmp_path / "torch" / "_inductor" / "compile_worker" / "__main__.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("import time\ntime.sleep(60)\n")
    assert not _allowed(f"{sys.executable} {fake} --kind=fork")
    # a symlink named like the real one but pointing elsewhere
    link = tmp_path / "__main__.py"
    link.symlink_to(tmp_path / "evil.py")
    assert not _allowed(f"{sys.executable} {link}")
    # the real path only as an argument of another script
    assert not _allowed(f"{sys.executable} /tmp/evil.py {WORKER_MAIN}")
    assert not _allowed(f"{sys.executable} -c import time; {WORKER_MAIN}")
    assert not _allowed("sleep 60")
    assert _allowed("/usr/bin/g++ -O2 x.cpp")


def test_module_lookalikes_are_not_allowed():
    """Red team round 6: `-m tritonhelper` passed the old prefix test for "triton"."""
    assert _allowed(f"{sys.executable} -m triton.tools.compile x")
    assert _allowed(f"{sys.executable} -c from triton.compiler import compile")
    assert not _allowed(f"{sys.executable} -m tritonhelper 1 2")
    assert not _allowed(f"{sys.executable} -m torch._inductor.compile_worker_evil")
    assert not _allowed(f"{sys.executable} -c from tritonx import y")
