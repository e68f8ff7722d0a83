"""SOL bounds counted in a child process, so that a reference which crashes the counting
process (a SIGSEGV in torch, ``os._exit``, a hang) costs its workload's SOL block, not the run.

Counting runs the problem's reference under torch's dispatch machinery (FakeTensors, meta
tensors, real tensors with stand-ins): corners of torch no evaluation of a candidate reaches.
Two of them ended the process outright (``copy.copy`` of a FakeTensor after a masked write:
SIGSEGV; ``copy.deepcopy`` of one: heap corruption), and the evaluation pipeline counted in
the harness's own process, so the whole run died with them. :class:`CountingChild` counts in
``python -m solbench.sol.isolated`` instead (the evaluation pipeline through
:func:`bounds_isolated_many`, ``solbench sol`` one child per job): the child writes one JSON
line per workload as soon as it is counted; a child that dies or hangs leaves the workload it
was counting with an error naming how it ended, and a fresh child takes the workloads after it.

Protocol, one JSON object per line. On the child's stdin: a header ``{"hardware": id or TOML
path, "cache": directory or null, "threads": torch's intra-op threads or null}``, then one
request per problem, ``{"item": i, "problem": path, "nonce": token, "workloads": [Workload
JSON, ...]}``, sent when the last one is answered; the end of input ends the child. On its
stdout, for each workload of a request, in order: ``{"counting": [i, uuid], "nonce"}`` when its
count starts, then ``{"item", "uuid", "nonce", "bounds": {"refined": SolBound JSON, "solar":
...}}`` or ``{"item", "uuid", "nonce", "error"}``; ``{"done": true}`` at the end. The
reference runs with stdin read from /dev/null and stdout going to stderr.

The parent reads replies in binary, a line at most :data:`MAX_LINE` bytes and at most
:data:`QUEUED_LINES` lines ahead, checks the workload's time on every line, sees the child's
death within a second even while a process it forked holds the pipe open, and when a child
ends kills its session, every process carrying its token (:data:`TOKEN_ENV`) and a ptrace
tracer holding it. This protects a run from a reference's accidents; a reference is trusted
problem code, and a deliberately hostile one can still forge the bounds of problems counted
after it in the same child (docs/sol-model.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import limits, paths
from ..proc import procfs, signals
from ..proc.lines import LineReader
from .bound import SolBound

#: seconds a counting child may take for one workload (a hang ends there): the heaviest dev
#: workloads count in a few seconds on a 2-core host
PER_WORKLOAD_S = paths.sol_count_timeout_s()
#: seconds for the child to start (importing torch and solbench)
START_S = 60.0
#: the longest reply line taken (bytes); a longer one is dropped as it is read
MAX_LINE = 1 << 20
#: reply lines read ahead of the parent at most (the reader then waits: memory stays bounded,
#: at most this many MAX_LINE lines)
QUEUED_LINES = 64
#: the environment variable that marks one counting child and everything it starts
TOKEN_ENV = paths.COUNTING


def counting_in_process() -> bool:
    """``SOLBENCH_SOL_IN_PROCESS=1``: count in the caller's process instead (debugging: a crash
    of a count is then the caller's)."""
    return paths.sol_in_process()


class CountFailed(Exception):
    """The counting child ended without a bound for this workload (message: how)."""


def _child_env(token: str) -> dict[str, str]:
    # the child imports the same solbench as this process, wherever it was imported from
    root = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        **{TOKEN_ENV: token})


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


def bounds_isolated_many(items: list, hardware: str, timeout_s: float | None = None,
                         cache=None, child: "CountingChild | None" = None) -> list[dict]:
    """For each ``(problem, workloads)`` of ``items``, ``{uuid: {"refined": SolBound, "solar":
    SolBound}}`` or ``{uuid: CountFailed}`` (the reference raised, the problem did not load, or
    the child died or hung while counting that workload), counted by one :class:`CountingChild`
    for all of them. ``timeout_s``: the most a child may spend on one workload (default
    :data:`PER_WORKLOAD_S`). ``cache``: a :class:`~solbench.sol.cache.CountsCache` read here
    first and filled by the child; the child starts only when a workload misses it. ``child``:
    a :class:`CountingChild` made with the same hardware and cache, which the caller closes
    (or aborts from another thread); None: one of this call's own. Raises nothing for a bad
    reference."""
    from .batch import cached_bounds

    out: list[dict] = []
    own = child is None
    if own:
        child = CountingChild(hardware, timeout_s, cache=None if cache is None else str(cache.root),
                              cache_key=None if cache is None else cache.key)
    with child if own else contextlib.nullcontext(child):
        for i, (p, ws) in enumerate(items):
            got = cached_bounds(p, list(ws), hardware, cache)
            missed = [w for w in ws if w.uuid not in got]
            if missed:
                got.update(child.count(i, str(p.path), missed))
            out.append(got)
    return out


#: a counting child spawned ahead of need (:func:`prestart`): (process, reply reader, stderr
#: file, token, registry), taken by the next :meth:`CountingChild._start` of this process
_SPARE: tuple | None = None


def _spawn(token: str, err, registry):
    """A counting child (its header not yet sent) and its reply reader."""
    # a session of its own: what a reference forks is killed with it (killpg) at the end;
    # -P: the caller's working directory is not on the child's import path (a secrets.py
    # or json.py there would be imported in place of the standard module)
    with registry.lock if registry is not None else contextlib.nullcontext():
        proc = subprocess.Popen([sys.executable, "-P", "-m", "solbench.sol.isolated"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=_child_env(token),
                                start_new_session=True)
        if registry is not None:
            registry.add(proc.pid)
    # the raw pipe, polled (solbench.proc.lines): the reading thread stops when told
    # although a process the child forked keeps the pipe open; a line is at most MAX_LINE
    # bytes, a longer one is no reply and is dropped as it comes
    lines = LineReader(proc.stdout, max_line=MAX_LINE, max_queued=QUEUED_LINES, overlong="drop",
                       name="solbench-counting-replies")
    return proc, lines


def prestart(registry=None) -> None:
    """Spawn a counting child now, before the hardware it prices is known: its interpreter
    and imports (torch's included: seconds) run while the caller imports, loads the problem
    and starts its workers. The child waits for its header; the next :class:`CountingChild`
    of this process with the same ``registry`` takes it (a count then starts without that
    wait), and :func:`discard_spare` ends it when none did. A second call while one waits
    does nothing. Raises OSError when the process cannot be spawned."""
    global _SPARE
    if _SPARE is not None:
        return
    token = secrets.token_hex(16)
    err = tempfile.TemporaryFile(mode="w+b")
    proc, lines = _spawn(token, err, registry)
    _SPARE = (proc, lines, err, token, registry)


def discard_spare() -> None:
    """End the child :func:`prestart` spawned if no count took it (its session and every
    process carrying its token)."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    if spare is None:
        return
    proc, lines, err, token, registry = spare
    try:
        proc.stdin.close()
    except OSError:
        pass
    _end(proc, lines, token, registry)
    err.close()


def _end(proc, lines, token: str, registry) -> int | None:
    """Kill a counting child's session and every process that carries its token, reap the
    child (its exit status, or None when not reaped), tell ``registry`` and stop its reader."""
    signals.send_group(proc.pid, signal.SIGKILL)  # the child and whatever it left running
    # what left the session (setsid) or the subreaper (a double fork after the child died)
    signals.kill_marked(TOKEN_ENV, token)
    # a tracer (ptrace) that never waits would hold the wait: killed after 5 s
    rc = signals.reap(proc, timeout_s=limits.SOL_CHILD_EXIT_S, tries=2)
    if registry is not None:
        registry.discard(proc.pid)
    lines.stop()
    return rc


def _take_spare(registry):
    """The pre-started child when there is one for ``registry`` and it is still running."""
    global _SPARE
    spare = _SPARE
    if spare is None or spare[4] is not registry:
        return None
    _SPARE = None
    if spare[0].poll() is not None:  # it died waiting: ended as a spare would be
        _SPARE = spare
        discard_spare()
        return None
    return spare


class CountingChild:
    """One counting process (``python -m solbench.sol.isolated``) that counts problems one at a
    time, as :meth:`count` hands them over, and is replaced by a fresh one when it dies or
    hangs. A child costs an interpreter and torch's import (seconds), so one serves a whole run.

    Use as a context manager, or call :meth:`close`: it ends the child's session (the child and
    whatever its references left running). Not thread-safe: one child per thread.

    Args:
        hardware: spec id or TOML path priced in the child.
        timeout_s: the most a child may spend on one workload (default :data:`PER_WORKLOAD_S`;
            starting a child may take :data:`START_S` more).
        cache: a :class:`~solbench.sol.cache.CountsCache` directory the child reads counts from
            and stores them in, or None.
        cache_key: the MAC key of that cache's entries (bytes; None: unsigned entries). It
            reaches the child on its request pipe, never in its environment or arguments.
        registry: where the caller keeps the pids of its own helper processes (an object with
            ``lock``, a context manager held while the child is spawned, ``add(pid)`` and
            ``discard(pid)``), so that a caller watching its children for strays (the
            harness, while a candidate runs) knows this one; None: no one is told.
        threads: torch's intra-op threads in the child (``torch.set_num_threads``; None: torch's
            default, one per core): 1 where one child runs per core.
    """

    def __init__(self, hardware: str, timeout_s: float | None = None, cache: str | None = None,
                 threads: int | None = None, cache_key: bytes | None = None, registry=None):
        # the child may start elsewhere than this process is: a spec file by its full path
        self.hardware = str(Path(hardware).resolve()) if Path(str(hardware)).is_file() else str(hardware)
        self.threads = threads
        self._token: str | None = None
        self.per = timeout_s if timeout_s is not None else PER_WORKLOAD_S
        self.cache = None if cache is None else str(cache)
        self.cache_key = cache_key
        self.registry = registry
        self._proc: subprocess.Popen | None = None
        self._lines: LineReader | None = None
        self._err = None
        self._fresh = False
        #: fresh children in a row that ended before counting anything: from 2 on, the
        #: interpreter cannot start here and every later problem fails at once
        self._dead_starts = 0
        self._broken: str | None = None
        self._aborted = False

    def __enter__(self) -> "CountingChild":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def count(self, item: int, problem_path: str, workloads: list) -> dict:
        """Both models' bounds of each of ``workloads`` (:class:`~solbench.spec.Workload`) of the
        problem at ``problem_path``: ``{uuid: {"refined": SolBound, "solar": SolBound}}`` or
        ``{uuid: CountFailed}``. ``item`` names the problem in the replies. A workload whose
        count kills or hangs the child is lost alone: a fresh child takes the ones after it.
        Raises nothing for a bad reference."""
        out: dict = {}
        todo = list(workloads)
        while todo:
            if self._broken is not None or self._aborted:
                for w in todo:
                    out[w.uuid] = CountFailed(self._broken or "counting was stopped")
                break
            if self._proc is None:
                self._start()
            fresh, self._fresh = self._fresh, False
            # a token per request: a line written before this request was sent (by a process
            # an earlier problem's reference forked) cannot answer for it
            nonce = secrets.token_hex(16)
            self._send({"item": item, "problem": str(Path(problem_path).resolve()), "nonce": nonce,
                        "workloads": [w.model_dump(mode="json") for w in todo]})
            started, killed = self._collect(item, nonce, [w.uuid for w in todo], fresh, out)
            rest = [w for w in todo if w.uuid not in out]
            if not rest:
                self._dead_starts = 0
                break
            rc, stderr = self._stop(killed)
            how = _how_it_ended(rc, stderr)
            if not started:
                if not fresh:
                    continue  # it ended between problems: a fresh child takes this one
                # a fresh child ended before counting any of these (the interpreter could not
                # start, the request was refused): a new child would end the same way
                self._dead_starts += 1
                for w in rest:
                    out[w.uuid] = CountFailed(how + " before counting this workload")
                if self._dead_starts >= 2:
                    self._broken = how + " before counting this workload"
                break
            self._dead_starts = 0
            if started[-1] == rest[0].uuid:
                # it ended while counting rest[0]: that one is lost, the others get a new child
                out[rest[0].uuid] = CountFailed(how + " while counting this workload")
                rest = rest[1:]
            todo = rest
        return out

    def close(self) -> None:
        """End the child: no more requests; its session is killed once it has exited (or
        after 5 s)."""
        if self._proc is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            self._stop(False)

    def abort(self) -> None:
        """Kill the child now, from any thread (the caller is stopping: Ctrl-C, an error): the
        workloads of :meth:`count` still to come fail at once, and no new child starts."""
        self._aborted = True
        proc = self._proc
        if proc is not None:
            signals.send_group(proc.pid, signal.SIGKILL)

    def _start(self) -> None:
        spare = _take_spare(self.registry)
        if spare is not None:  # spawned ahead of need (prestart): its header goes now
            proc, lines, self._err, self._token, _ = spare
        else:
            self._err = tempfile.TemporaryFile(mode="w+b")
            self._token = secrets.token_hex(16)
            proc, lines = _spawn(self._token, self._err, self.registry)
        self._proc, self._lines, self._fresh = proc, lines, True
        self._send({"hardware": self.hardware, "cache": self.cache, "threads": self.threads,
                    "cache_key": self.cache_key.hex() if self.cache_key else None})

    def _send(self, obj) -> None:
        try:
            self._proc.stdin.write((json.dumps(obj) + "\n").encode())
            self._proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: told by its status

    def _collect(self, item: int, nonce: str, expected: list[str], fresh: bool, out: dict):
        """Take the replies to one request into ``out``, in the only order the child makes
        them: a ``counting`` line for the next workload of ``expected``, then one result for it;
        any other line (a second result, a workload out of turn, another request's token, a
        malformed bound) is not taken. Each workload may take ``per`` seconds from its
        ``counting`` line, the whole request ``per`` per workload (plus :data:`START_S` for a
        fresh child), however the lines come. Returns (the uuids it started, in order; whether
        it was killed for its time)."""
        proc, lines = self._proc, self._lines
        start = START_S if fresh else 0.0
        t0 = time.monotonic()
        hard = t0 + start + self.per * max(len(expected), 1)
        deadline = t0 + start + self.per
        started: list[str] = []
        nxt, current = 0, None  # index of the next expected workload; the one being counted
        exited = None  # when the child was first seen to have exited
        while nxt < len(expected) or current is not None:
            now = time.monotonic()
            wait = min(deadline, hard) - now
            if wait <= 0:  # checked on every line: a flood of them does not hold this loop
                return started, proc.poll() is None
            if proc.poll() is not None or procfs.is_zombie(proc.pid):
                # exited (a zombie not yet reported to us: a tracer holds it): a second for what
                # is still in the pipe (a process it forked may hold the pipe open, and write
                # into it, for as long as it likes)
                exited = now if exited is None else exited
                if now - exited >= 1.0:
                    return started, False
            try:
                # in slices: the child's death is seen within one, not at the deadline
                line = lines.get(timeout=min(wait, 0.5))
            except queue.Empty:
                continue
            if line is None:
                return started, False
            try:
                msg = json.loads(line)
            except Exception:  # noqa: BLE001 - not a reply (bad UTF-8, JSON nested past the recursion limit)
                continue
            if not isinstance(msg, dict) or msg.get("nonce") != nonce:
                continue
            if "counting" in msg:
                if current is None and nxt < len(expected) and msg["counting"] == [item, expected[nxt]]:
                    current = expected[nxt]
                    started.append(current)
                    nxt += 1
                    deadline = time.monotonic() + self.per
                continue
            if current is None or [msg.get("item"), msg.get("uuid")] != [item, current]:
                continue
            uuid, current = current, None
            if "error" in msg:
                out[uuid] = CountFailed(str(msg["error"])[:2000])
                continue
            try:
                out[uuid] = {m: SolBound.model_validate(b) for m, b in msg["bounds"].items()}
            except Exception as e:  # noqa: BLE001 - a malformed reply is this workload's error
                out[uuid] = CountFailed(f"the counting process replied a malformed bound ({type(e).__name__})")
        return started, False

    def _stop(self, killed: bool) -> tuple[int | None, str]:
        """Kill the child's session and every process that carries its token, and reap the
        child; (exit status, None when killed for its time or not reaped; the tail of its
        stderr)."""
        proc = self._proc
        if not killed:
            try:  # it closed its stream: let it finish exiting, so its status is its own
                proc.wait(timeout=limits.SOL_CHILD_EXIT_S)
            except subprocess.TimeoutExpired:
                pass
        rc = _end(proc, self._lines, self._token, self.registry)
        err = self._err
        err.seek(0, 2)
        err.seek(max(0, err.tell() - 4000))  # the tail only: a reference may print gigabytes
        stderr = err.read().decode("utf-8", "replace")
        err.close()
        try:
            proc.stdin.close()
        except OSError:
            pass
        self._proc = self._lines = self._err = None
        return (None if killed or rc is None else rc), stderr


#: the child's reply stream (a duplicate of its stdout, kept aside from what the reference prints)
_PROTO = None


def _reply(obj) -> None:
    _PROTO.write(json.dumps(obj) + "\n")
    _PROTO.flush()


def main() -> int:
    """The child: read the header (hardware, cache), then one problem per line until the end
    of input; count each problem's workloads together
    (:func:`solbench.sol.batch.iter_problem_counts`), price each with both models, reply a line
    per workload as soon as it is done."""
    global _PROTO
    # requests come on a duplicate of stdin and replies go on a duplicate of stdout, kept
    # aside: the reference reads an empty stdin, and what it prints (stdout goes to stderr)
    # cannot pass for a reply
    requests = os.fdopen(os.dup(0), "r")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    sys.stdout.flush()
    _PROTO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    from ..spec import load_problem
    from ..spec.workload import Workload
    from .batch import MODELS, iter_problem_counts
    from .bound import bound
    from .counting import CountingError

    header = json.loads(requests.readline() or "{}")
    hw = header["hardware"]
    if header.get("threads"):
        import torch

        torch.set_num_threads(int(header["threads"]))
    cache = None
    if header.get("cache"):
        from .cache import CountsCache

        key = header.get("cache_key")
        cache = CountsCache(header["cache"], key=bytes.fromhex(key) if key else None)
    # orphans of the references' processes are re-parented here, so a double fork is found too
    signals.become_subreaper()
    for line in requests:
        # what the last problem's reference forked (it inherited the reply stream) ends
        # before the next problem is counted: it cannot answer for that one
        signals.kill_own_descendants()
        entry = json.loads(line)
        item, nonce = entry["item"], entry["nonce"]

        def reply(obj) -> None:
            _reply({**obj, "nonce": nonce})

        wls = [Workload.model_validate(w) for w in entry["workloads"]]
        try:
            problem = load_problem(entry["problem"])
        except Exception as e:  # noqa: BLE001 - this problem's workloads fail, not the others
            for w in wls:
                reply({"counting": [item, w.uuid]})
                reply({"item": item, "uuid": w.uuid, "error": f"{type(e).__name__}: {e}"})
            continue
        counts = iter_problem_counts(problem, wls, cache)
        for w in wls:
            reply({"counting": [item, w.uuid]})
            c = next(counts)
            if isinstance(c, CountingError):
                reply({"item": item, "uuid": w.uuid, "error": f"CountingError: {c}"})
                continue
            try:
                both = {m: bound(problem, w, hardware=hw, model=m, counts=c).model_dump(mode="json")
                        for m in MODELS}
            except Exception as e:  # noqa: BLE001 - a pricing failure is this workload's error
                reply({"item": item, "uuid": w.uuid, "error": f"{type(e).__name__}: {e}"})
                continue
            reply({"item": item, "uuid": w.uuid, "bounds": both})
        del counts
    signals.kill_own_descendants()
    _reply({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
