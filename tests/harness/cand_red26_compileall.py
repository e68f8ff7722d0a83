"""Hostile (red team 26): a solution source named ``compileall.py``. bytecode.fill runs
``python -m compileall`` in the trusted parent as every command ends; ``-m`` puts the current
directory first on ``sys.path``, so a user who runs ``solbench eval`` from a candidate's folder
(a downloaded submission, an agent's output folder) ran this file as the harness's own user,
unsandboxed. The test copies it into the cwd as ``compileall.py``; it writes its proof to
``$R26_MARK``."""
import os

open(os.environ.get("R26_MARK", "/tmp/r26_compileall_ran"), "w").write(
    "ran in pid %d uid %d cwd %s\n" % (os.getpid(), os.getuid(), os.getcwd()))
