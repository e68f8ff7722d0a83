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

Protocol (one request on stdin, JSON): ``{"hardware": id or TOML path, "problems": [{"item":
i, "problem": path, "workloads": [Workload JSON, ...]}, ...]}``; replies on stdout, one JSON
object per line: ``{"counting": [i, uuid]}`` when a workload's count starts, then ``{"item",
"uuid", "bounds": {"refined": SolBound JSON, "solar": ...}}`` or ``{"item", "uuid", "error"}``;
``{"done": true}`` at the end.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .bound import SolBound

#: seconds a counting child may take for one workload (a hang ends there): the heaviest dev
#: workloads count in a few seconds on a 2-core host
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
    """Both models' bounds of each of ``workloads`` of ``problem`` on ``hardware``:
    ``{uuid: {"refined": SolBound, "solar": SolBound}}``, or ``{uuid: CountFailed}``
    (:func:`bounds_isolated_many` for one problem). Raises nothing for a bad reference."""
    return bounds_isolated_many([(problem, list(workloads))], hardware, timeout_s)[0]


def bounds_isolated_many(items: list, hardware: str, timeout_s: float | None = None) -> list[dict]:
    """For each ``(problem, workloads)`` of ``items``, ``{uuid: {"refined": SolBound, "solar":
    SolBound}}`` or ``{uuid: CountFailed}`` (the reference raised, the problem did not load, or
    the child died or hung while counting that workload), counted in one child process for all
    of them (a child costs an interpreter and torch's import, seconds). A workload whose count
    kills the child is lost alone: a fresh child takes the ones after it. ``timeout_s``: the
    most a child may spend on one workload (default :data:`PER_WORKLOAD_S`; starting it may
    take :data:`START_S` more). Raises nothing for a bad reference."""
    per = timeout_s if timeout_s is not None else PER_WORKLOAD_S
    out: list[dict] = [{} for _ in items]
    todo = [(i, w) for i, (_, ws) in enumerate(items) for w in ws]
    while todo:
        req = {"hardware": str(hardware), "problems": []}
        for i, w in todo:
            if not req["problems"] or req["problems"][-1]["item"] != i:
                req["problems"].append({"item": i, "problem": str(items[i][0].path), "workloads": []})
            req["problems"][-1]["workloads"].append(w.model_dump(mode="json"))
        rc, started, done, stderr = _run_child(json.dumps(req), per, out,
                                               [(i, w.uuid) for i, w in todo])
        rest = [(i, w) for i, w in todo if w.uuid not in out[i]]
        if done and rc == 0:
            for i, w in rest:  # not reported by a child that says it finished: not counted
                out[i][w.uuid] = CountFailed("the counting process gave no bound for this workload")
            break
        if not rest:
            break
        how = _how_it_ended(rc, stderr)
        if not started or started[-1] != [rest[0][0], rest[0][1].uuid]:
            # it ended before counting any of these (the interpreter could not start, the
            # request was refused): a new child would end the same way
            for i, w in rest:
                out[i][w.uuid] = CountFailed(how + " before counting this workload")
            break
        # the child ended while counting rest[0]: that one is lost, the others get a new child
        out[rest[0][0]][rest[0][1].uuid] = CountFailed(how + " while counting this workload")
        todo = rest[1:]
    return out


def _run_child(req: str, per_workload_s: float, out: list[dict], expected: list[tuple[int, str]]):
    """Run one counting child on ``req``, filling ``out`` from its replies as they come, and
    kill it (with every process it started) when a workload's count, or its start, outlasts
    its time. Returns (exit status, None when killed; the [item, uuid] pairs it started, in
    order; whether it said it was done; the tail of its stderr).

    The replies are taken in the only order the child makes them, ``expected``'s: a
    ``counting`` line for the next workload, then one result for it; any other line (a second
    result, a workload out of turn, a malformed bound) is not taken. The whole run may take
    :data:`START_S` plus ``per_workload_s`` per workload, however the lines come."""
    err = tempfile.TemporaryFile(mode="w+b")
    # a session of its own: what the reference forks is killed with it (killpg) at the end
    proc = subprocess.Popen([sys.executable, "-m", "solbench.sol.isolated"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, text=True, env=_child_env(),
                            start_new_session=True)
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            for line in proc.stdout:
                lines.put(line[:1 << 20])
        except (OSError, ValueError):
            pass
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        proc.stdin.write(req)
        proc.stdin.close()
    except OSError:
        pass  # it died at once: told by its status
    started: list = []
    done = killed = False
    t0 = time.monotonic()
    hard = t0 + START_S + per_workload_s * max(len(expected), 1)
    deadline = t0 + START_S + per_workload_s
    nxt, current = 0, None  # index of the next expected workload; the one being counted
    try:
        while True:
            now = time.monotonic()
            wait = min(deadline, hard) - now
            if proc.poll() is not None:
                wait = min(wait, 1.0)  # exited: what is still in the pipe, not a forked writer's
            try:
                line = lines.get(timeout=max(0.0, wait))
            except queue.Empty:
                if proc.poll() is None:
                    killed = True
                break
            if line is None:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if msg.get("done") is True:
                if current is None and nxt == len(expected):
                    done = True
                continue
            if "counting" in msg:
                if current is None and nxt < len(expected) and msg["counting"] == list(expected[nxt]):
                    current = expected[nxt]
                    started.append(list(current))
                    nxt += 1
                    deadline = time.monotonic() + per_workload_s
                continue
            if current is None or [msg.get("item"), msg.get("uuid")] != list(current):
                continue
            item, uuid = current
            current = None
            if "error" in msg:
                out[item][uuid] = CountFailed(str(msg["error"])[:2000])
                continue
            try:
                out[item][uuid] = {m: SolBound.model_validate(b) for m, b in msg["bounds"].items()}
            except Exception as e:  # noqa: BLE001 - a malformed reply is this workload's error
                out[item][uuid] = CountFailed(f"the counting process replied a malformed bound ({type(e).__name__})")
    finally:
        if not killed:
            try:  # it closed its stream: let it finish exiting, so its status is its own
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and whatever it left running
        except OSError:
            pass
        rc = proc.wait()
    err.seek(0, 2)
    err.seek(max(0, err.tell() - 4000))
    stderr = err.read().decode("utf-8", "replace")
    err.close()
    return (None if killed else rc), started, done, stderr


def _become_subreaper() -> None:
    """Orphans of this process's descendants are re-parented to it (Linux prctl
    PR_SET_CHILD_SUBREAPER), so :func:`_kill_descendants` finds a double fork too."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _kill_descendants() -> None:
    """SIGKILL every descendant process of this one, and reap them: the children now, and
    the grandchildren on the next pass, once they are re-parented here
    (:func:`_become_subreaper`)."""
    for _ in range(50):
        kids: set[int] = set()
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    kids.update(int(c) for c in f.read().split())
            except OSError:
                continue
        if not kids:
            return
        for c in kids:
            try:
                os.kill(c, signal.SIGKILL)
            except OSError:
                pass
        for c in kids:
            try:
                os.waitpid(c, 0)
            except ChildProcessError:
                pass


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

    hw = req["hardware"]
    _become_subreaper()
    for entry in req["problems"]:
        # what the last problem's reference forked (it inherited the reply stream) ends
        # before the next problem is counted: it cannot answer for that one
        _kill_descendants()
        item = entry["item"]
        wls = [Workload.model_validate(w) for w in entry["workloads"]]
        try:
            problem = load_problem(entry["problem"])
        except Exception as e:  # noqa: BLE001 - this problem's workloads fail, not the others
            for w in wls:
                _reply({"counting": [item, w.uuid]})
                _reply({"item": item, "uuid": w.uuid, "error": f"{type(e).__name__}: {e}"})
            continue
        counts = iter_problem_counts(problem, wls)
        for w in wls:
            _reply({"counting": [item, w.uuid]})
            c = next(counts)
            if isinstance(c, CountingError):
                _reply({"item": item, "uuid": w.uuid, "error": f"CountingError: {c}"})
                continue
            try:
                both = {m: bound(problem, w, hardware=hw, model=m, counts=c).model_dump(mode="json")
                        for m in MODELS}
            except Exception as e:  # noqa: BLE001 - a pricing failure is this workload's error
                _reply({"item": item, "uuid": w.uuid, "error": f"{type(e).__name__}: {e}"})
                continue
            _reply({"item": item, "uuid": w.uuid, "bounds": both})
    _kill_descendants()
    _reply({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
