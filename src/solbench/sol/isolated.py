"""SOL bounds counted in a child process, so that a reference which crashes the counting
process (a SIGSEGV in torch, ``os._exit``, a hang) costs its workload's SOL block, not the run.

Counting runs the problem's reference under torch's dispatch machinery (FakeTensors, meta
tensors, real tensors with stand-ins): corners of torch no evaluation of a candidate reaches.
Two of them ended the process outright (``copy.copy`` of a FakeTensor after a masked write:
SIGSEGV; ``copy.deepcopy`` of one: heap corruption), and the evaluation pipeline counted in
the harness's own process, so the whole run died with them. :func:`bounds_isolated` counts
in ``python -m solbench.sol.isolated`` instead: the child writes one JSON line per workload as
soon as it is counted; a child that dies leaves the workload it was counting with an error
naming how it died, and a fresh child takes the workloads after it.

Protocol (one request on stdin, JSON): ``{"problem": path, "hardware": id or TOML path,
"workloads": [Workload JSON, ...]}``; replies on stdout, one JSON object per line:
``{"counting": uuid}`` when a workload's count starts, then ``{"uuid", "bounds": {"refined":
SolBound JSON, "solar": ...}}`` or ``{"uuid", "error"}``; ``{"done": true}`` at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .bound import SolBound

#: seconds a counting child may take per workload it is given (plus :data:`START_S`): the
#: heaviest dev problem counts 48 workloads in about 28 s on a 2-core host
PER_WORKLOAD_S = float(os.environ.get("SOLBENCH_SOL_COUNT_TIMEOUT_S", "120"))
#: seconds for the child to start (importing torch and solbench)
START_S = 60.0


class CountFailed(Exception):
    """The counting child ended without a bound for this workload (message: how)."""


def _child_env() -> dict[str, str]:
    # the child imports the same solbench as this process, wherever it was imported from
    root = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def _how_it_ended(rc: int | None, stderr: str) -> str:
    if rc is None:
        return "the counting process did not finish in time and was killed"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        how = f"the counting process died of {name}"
    else:
        how = f"the counting process exited with status {rc}"
    tail = [ln for ln in stderr.strip().splitlines() if ln.strip()][-1:]
    return how + (f" ({tail[0][:200]})" if tail else "")


def bounds_isolated(problem, workloads: list, hardware: str,
                    timeout_s: float | None = None) -> dict[str, dict[str, SolBound] | CountFailed]:
    """Both models' bounds of each of ``workloads`` of ``problem`` on ``hardware``, counted in
    child processes: ``{uuid: {"refined": SolBound, "solar": SolBound}}``, or ``{uuid:
    CountFailed}`` for a workload that could not be counted (the reference raised, or the child
    died or timed out while counting it). Workloads after one that killed its child are counted
    in a fresh child. ``timeout_s``: per child (default: :data:`START_S` +
    :data:`PER_WORKLOAD_S` per workload). Raises nothing for a bad reference."""
    out: dict[str, dict[str, SolBound] | CountFailed] = {}
    todo = list(workloads)
    while todo:
        req = json.dumps({"problem": str(problem.path), "hardware": str(hardware),
                          "workloads": [w.model_dump(mode="json") for w in todo]})
        limit = timeout_s if timeout_s is not None else START_S + PER_WORKLOAD_S * len(todo)
        rc: int | None
        try:
            r = subprocess.run([sys.executable, "-m", "solbench.sol.isolated"], input=req,
                               capture_output=True, text=True, timeout=limit, env=_child_env())
            rc, stdout, stderr = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc = None
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        done = False
        started: list[str] = []
        for line in stdout.splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # something the reference printed
            if not isinstance(msg, dict):
                continue
            if msg.get("done") is True:
                done = True
            elif isinstance(msg.get("counting"), str):
                started.append(msg["counting"])
            elif isinstance(msg.get("uuid"), str) and "error" in msg:
                out[msg["uuid"]] = CountFailed(str(msg["error"]))
            elif isinstance(msg.get("uuid"), str) and isinstance(msg.get("bounds"), dict):
                out[msg["uuid"]] = {m: SolBound.model_validate(b) for m, b in msg["bounds"].items()}
        rest = [w for w in todo if w.uuid not in out]
        if done and rc == 0:
            for w in rest:  # not reported by a child that says it finished: not counted
                out[w.uuid] = CountFailed("the counting process gave no bound for this workload")
            break
        if not rest:
            break
        how = _how_it_ended(rc, stderr)
        if not started or started[-1] != rest[0].uuid:
            # it ended before counting anything of these (the problem did not load, the
            # interpreter could not start): a new child would end the same way
            for w in rest:
                out[w.uuid] = CountFailed(how + " before counting this workload")
            break
        # the child ended while counting rest[0]: that one is lost, the others get a new child
        out[rest[0].uuid] = CountFailed(how + " while counting this workload")
        todo = rest[1:]
    return out


#: the child's reply stream (a duplicate of its stdout, kept aside from what the reference prints)
_PROTO = None


def _reply(obj) -> None:
    _PROTO.write(json.dumps(obj) + "\n")
    _PROTO.flush()


def main() -> int:
    """The child: read the request, count each workload (one problem's workloads together:
    :func:`solbench.sol.batch.iter_problem_counts`), price it with both models, reply a line
    per workload as soon as it is done."""
    global _PROTO
    req = json.loads(sys.stdin.read())
    # what the reference prints must not pass for a reply: the replies go on a duplicate of
    # stdout kept aside, and stdout (the fd and sys.stdout) goes to stderr
    sys.stdout.flush()
    _PROTO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from ..spec import load_problem
    from ..spec.workload import Workload
    from .batch import MODELS, iter_problem_counts
    from .bound import bound
    from .counting import CountingError

    problem = load_problem(req["problem"])
    wls = [Workload.model_validate(w) for w in req["workloads"]]
    hw = req["hardware"]
    counts = iter_problem_counts(problem, wls)
    for w in wls:
        _reply({"counting": w.uuid})
        c = next(counts)
        if isinstance(c, CountingError):
            _reply({"uuid": w.uuid, "error": f"CountingError: {c}"})
            continue
        try:
            both = {m: bound(problem, w, hardware=hw, model=m, counts=c).model_dump(mode="json")
                    for m in MODELS}
        except Exception as e:  # noqa: BLE001 - a pricing failure is this workload's error
            _reply({"uuid": w.uuid, "error": f"{type(e).__name__}: {e}"})
            continue
        _reply({"uuid": w.uuid, "bounds": both})
    _reply({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
