"""A Ctrl-C ends ``solbench eval`` even when a library swallows the KeyboardInterrupt.

On this CPU host a SIGINT 1.5 s into ``solbench eval --spare-workers 2`` landed in ``import
torch`` (``check_device``), whose NumPy initialisation clears the exception: the handler had
killed the workers and printed "interrupted", yet the command went on, its early workers
spawned after the shutdown and it printed PASSED with exit 0 (or, with the workers refused,
wrote a RUNTIME_ERROR "solbench is shutting down" trace to the results file for a candidate
that did nothing wrong). Here ``check_device`` is replaced by one that interrupts its own
process and swallows the exception, as torch's import did."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from workers_below import my_workers, subreaper  # noqa: E402

_DRIVER = """
import os, signal, sys
# as a terminal's command has it: a test run started in the background (bash ignores SIGINT
# for background jobs, and the ignore is inherited) must not make this Ctrl-C a no-op
signal.signal(signal.SIGINT, signal.default_int_handler)
import solbench.cli
from solbench.cli import evaluate

real = evaluate.check_device

def swallowing(device):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes
            pass
    except KeyboardInterrupt:
        pass  # what torch's NumPy initialisation does with it
    return real(device)

evaluate.check_device = swallowing
sys.argv = ["solbench"] + sys.argv[1:]
solbench.cli.main()
"""


def test_a_swallowed_ctrl_c_still_ends_the_command_with_no_trace(tmp_path):
    subreaper()  # a worker the command left behind is found below this process
    before = my_workers()
    res = tmp_path / "traces.jsonl"
    p = subprocess.run([sys.executable, "-c", _DRIVER, "eval", "l1/relu_fp32", "-w", "0", "--device", "cpu",
                        "--rounds", "1", "--iters", "4", "--spare-workers", "2", "-q", "-o", str(res)],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert "interrupted" in p.stderr, p.stderr[-2000:]
    assert p.returncode == 130, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert not res.exists() or res.read_text() == "", [json.loads(x)["evaluation"]["status"]
                                                       for x in res.read_text().splitlines()]
    time.sleep(0.5)  # a killed tree's last processes are reaped and gone
    assert my_workers() - before == set()
