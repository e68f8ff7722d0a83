"""``solbench generate``: ask a model (or an agent) for a candidate of every problem, and write
the candidates where ``solbench run --solutions DIR`` finds them.

Layout of the output folder ``OUT`` (docs/study.md):

* ``OUT/<problem>/<label>.py``: a generated Python candidate (KernelBench ``ModelNew``, or
  ``run`` for a problem directory); ``<label>.json`` a solution.json (CUDA C++ for a problem
  directory, or what an agent wrote). ``<label>`` names the model configuration
  (:mod:`solbench.spec.generation`: ``<model>@T<temperature>.s<sample>.t<turn>``), so every
  trace of it carries the configuration.
* ``OUT/<problem>/<label>.json`` holding ``{"generation_error": {...}}`` when the model gave
  nothing usable (no code, a malformed reply, a timeout, an API error, an agent that failed):
  ``solbench run`` records it as COMPILE_ERROR with that reason, so the unit still counts in
  every rate (a model that answers nothing is not left out of its denominator).
* ``OUT/<problem>/_gen/<label>.json``: the exchange: the request (messages, model,
  temperature), every attempt (time, HTTP status, error), the raw reply, the extracted code's
  status, token usage and, between turns, the feedback evaluation's verdict and log.
  Written (atomically) as soon as the reply is in, before the candidate file: with ``resume``
  a request whose reply was stored is never sent again, whatever its outcome (only an
  API_ERROR, where no reply came, is asked again).
* ``OUT/feedback.jsonl``: the traces of the evaluations between turns (``--turns``), signed as
  any results file.
* ``OUT/study.json``: the configuration of each generate run (model, endpoint, temperature,
  samples, turns, language, problems).

Refinement (``turns`` > 1): after turn t's candidate is written it is evaluated with the same
entry point as ``solbench eval`` (:func:`solbench.run.session.evaluate_and_score`) on the
feedback workloads, one evaluation at a time (the harness's timing wants the machine to
itself); turn t+1's request is the whole conversation so far plus the verdict and the log.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import SpecError
from ..spec import Problem, Workload, load_problem
from ..spec.generation import ModelConfig
from . import prompts
from .client import ANSWERED, AgentRunner, Answer, ChatClient, EndpointError
from .extract import extract_code

#: generation outcomes recorded in the exchange log (``status``)
GEN_STATUSES = ("GENERATED", "SYNTAX_ERROR", "NO_CODE", "MALFORMED_REPLY", "TIMEOUT", "API_ERROR",
                "AGENT_ERROR")

LOG_DIR = "_gen"
MAX_LABEL_BYTES = 200
FEEDBACK_FILE = "feedback.jsonl"


@dataclass
class GenerateOptions:
    """What :func:`generate` does. ``model``: the name sent to the endpoint (or the agent's
    name); ``language``: pytorch | triton | cuda; ``feedback_select``: problem -> the
    workloads of the evaluation between turns (default: the smallest by declared bytes)."""

    model: str
    out: Path
    samples: int = 1
    turns: int = 1
    temperature: float | None = None
    language: str = "pytorch"
    concurrency: int = 4
    resume: bool = False
    device: str = "cpu"
    feedback_select: Callable[[Problem], list[Workload]] | None = None
    feedback_iters: int | None = None
    endpoint: str | None = None  # recorded in study.json only


@dataclass
class GenerateResult:
    """Per generation status, how many; requests sent now; token usage of this run's replies;
    how many (problem, label)s were already done (resume)."""

    statuses: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    resumed: int = 0
    written: list[Path] = field(default_factory=list)
    feedback_evaluations: int = 0

    def to_json(self) -> dict:
        return {"statuses": self.statuses, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "resumed": self.resumed, "candidates": len(self.written),
                "feedback_evaluations": self.feedback_evaluations}


def resolve_targets(targets: list[str]) -> list[Path]:
    """Problems named by ``targets``: a bundled suite or problem (``l1``, ``l1/relu_fp32``), a problem directory, a KernelBench
    ``.py``, a folder of problems, or a folder of KernelBench ``.py`` files
    (:func:`solbench.suites.resolve_suite_or_dir`). Duplicates dropped, order kept. Raises SpecError naming the
    target that is none of these."""
    from ..suites import resolve_problem, resolve_suite_or_dir

    out: list[Path] = []
    for t in targets:
        p = resolve_problem(t)  # also SUITE/NAME and a bundled problem's bare NAME
        found = resolve_suite_or_dir(p if p.exists() else t)
        for f in found:
            if f.resolve() not in {x.resolve() for x in out}:
                out.append(f)
    return out


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _entry(problem: Problem) -> str:
    return "ModelNew" if problem.kind == "kernelbench" else "run"


def _candidate_suffix(problem: Problem, language: str) -> str:
    return ".json" if (problem.kind != "kernelbench" and language == "cuda") else ".py"


class _Study:
    def __init__(self, opts: GenerateOptions, client: ChatClient | None, agent: AgentRunner | None,
                 on_event: Callable[[str, str, dict], None] | None):
        self.o = opts
        self.client = client
        self.agent = agent
        self.on_event = on_event
        self.lock = threading.Lock()
        self.eval_lock = threading.Lock()
        self.result = GenerateResult()
        self.stopped = threading.Event()  # the endpoint refused the run: send nothing more

    # --- bookkeeping ---------------------------------------------------------------------
    def _count(self, status: str, answer: Answer | None, fresh: bool) -> None:
        with self.lock:
            self.result.statuses[status] = self.result.statuses.get(status, 0) + 1
            if fresh and answer is not None:
                self.result.requests += len(answer.attempts)
                self.result.prompt_tokens += int(answer.usage.get("prompt_tokens") or 0)
                self.result.completion_tokens += int(answer.usage.get("completion_tokens") or 0)
            elif not fresh:
                self.result.resumed += 1

    # --- one chain of turns --------------------------------------------------------------
    def chain(self, problem: Problem, sample: int) -> None:
        o = self.o
        pdir = o.out / problem.name
        messages = prompts.initial_messages(problem, o.language)
        for turn in range(1, o.turns + 1):
            cfg = ModelConfig(o.model, o.temperature, sample, turn)
            label = cfg.label()
            log_path = pdir / LOG_DIR / f"{label}.json"
            rec = _read_log(log_path)
            fresh = rec is None
            if fresh:
                if self.stopped.is_set():
                    return
                try:
                    rec = self._ask(problem, cfg, messages, pdir, label, log_path)
                except EndpointError:
                    self.stopped.set()
                    raise
            cand = self._write_candidate(problem, cfg, rec, pdir, label)
            self._count(rec["status"], Answer(**rec["answer"]) if fresh else None, fresh)
            with self.lock:
                self.result.written.append(cand)
            if self.on_event:
                self.on_event(problem.name, label, {"status": rec["status"], "resumed": not fresh,
                                                    "message": rec.get("message", "")})
            if turn == o.turns:
                break
            if "feedback" not in rec:
                rec["feedback"] = self._feedback(problem, cand, rec)
                _atomic_write(log_path, json.dumps(rec, indent=1, allow_nan=False))
            content = rec["answer"].get("content")
            if content:
                messages = messages + [{"role": "assistant", "content": content}]
            messages = messages + [prompts.feedback_message(rec["feedback"]["verdict"],
                                                            rec["feedback"]["log"])]

    def _ask(self, problem: Problem, cfg: ModelConfig, messages: list[dict], pdir: Path,
             label: str, log_path: Path) -> dict:
        o = self.o
        rec: dict = {"problem": problem.name, "problem_path": str(problem.path), "label": label,
                     "model": cfg.model, "temperature": cfg.temperature, "sample": cfg.sample,
                     "turn": cfg.turn, "language": o.language, "started": time.time()}
        if self.agent is not None:
            suffix = ".json" if problem.kind != "kernelbench" and o.language == "cuda" else ".py"
            target = pdir / f"{label}{suffix}"
            pdir.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            fb = None
            if cfg.turn > 1:
                fb = pdir / LOG_DIR / f"{label}.feedback.txt"
                fb.parent.mkdir(parents=True, exist_ok=True)
                fb.write_text(messages[-1]["content"])
            other = target.with_suffix(".py" if suffix == ".json" else ".json")
            other.unlink(missing_ok=True)
            ans = self.agent.run(problem.path, target, cfg.turn, fb)
            rec["request"] = {"agent": self.agent.argv, "problem": str(problem.path),
                              "solution": str(target), "turn": cfg.turn}
            if not target.is_file() and other.is_file():
                target = other  # the agent wrote the other form (a solution.json for a .py, or back)
            if ans.status == ANSWERED:
                if target.is_file():
                    text = target.read_text(errors="replace")
                    ans.content = text
                    if target.suffix == ".py":
                        ex = extract_code(f"```python\n{text}\n```", _entry(problem), "pytorch")
                        rec["status"], rec["message"] = (ex.status if ex.status != "NO_CODE" else "GENERATED",
                                                         ex.message)
                    else:
                        rec["status"], rec["message"] = "GENERATED", f"agent wrote {target.name}"
                    rec["code_file"] = target.name
                else:
                    rec["status"], rec["message"] = "NO_CODE", f"agent wrote no {target.name}"
            else:
                rec["status"], rec["message"] = ans.status, ans.message
        else:
            assert self.client is not None
            rec["request"] = self.client.request_body(cfg.model, messages, cfg.temperature)
            ans = self.client.ask(cfg.model, messages, cfg.temperature)
            if ans.status == ANSWERED:
                ex = extract_code(ans.content or "", _entry(problem), o.language)
                rec["status"], rec["message"], rec["code"] = ex.status, ex.message, ex.code
                if ans.finish_reason == "length":
                    rec["message"] += " (the reply was cut at max_tokens)"
            else:
                rec["status"], rec["message"] = ans.status, ans.message
        rec["answer"] = ans.to_json()
        rec["finished"] = time.time()
        # stored before the candidate: a killed run never asks this again
        _atomic_write(log_path, json.dumps(rec, indent=1, allow_nan=False))
        return rec

    def _write_candidate(self, problem: Problem, cfg: ModelConfig, rec: dict, pdir: Path,
                         label: str) -> Path:
        """The candidate file of ``rec`` (module docstring); rewritten from the log on resume."""
        if rec.get("code_file"):  # the agent wrote it
            p = pdir / rec["code_file"]
            if p.is_file():
                return p
        code = rec.get("code")
        if rec["status"] in ("GENERATED", "SYNTAX_ERROR") and code:
            if _candidate_suffix(problem, rec.get("language", self.o.language)) == ".py":
                p = pdir / f"{label}.py"
                _atomic_write(p, code if code.endswith("\n") else code + "\n")
                (pdir / f"{label}.json").unlink(missing_ok=True)
                return p
            sol = {"name": label, "definition": problem.name, "author": cfg.model,
                   "description": json.dumps({"generated_by": _config_json(cfg, rec)}),
                   "spec": {"languages": ["cuda_cpp"], "target_hardware": ["LOCAL"],
                            "entry_point": "kernel.cu::run", "destination_passing_style": False,
                            "binding": "torch"},
                   "sources": [{"path": "kernel.cu", "content": code}]}
            p = pdir / f"{label}.json"
            _atomic_write(p, json.dumps(sol, indent=1))
            return p
        p = pdir / f"{label}.json"
        status = rec["status"] if rec["status"] != "GENERATED" else "NO_CODE"
        _atomic_write(p, json.dumps({"generation_error": {"status": status, "message": rec.get("message", "")},
                                     "name": label, "definition": problem.name, "author": cfg.model,
                                     "generated_by": _config_json(cfg, rec)}, indent=1))
        (pdir / f"{label}.py").unlink(missing_ok=True)
        return p

    def _feedback(self, problem: Problem, cand: Path, rec: dict) -> dict:
        from ..run.plan import load_candidate

        c = load_candidate(cand, problem)
        if c.solution is None:
            return {"verdict": f"the candidate did not load: {c.load_error}", "log": "", "statuses": {}}
        return self._evaluate(problem, c)

    def _evaluate(self, problem: Problem, c) -> dict:
        from .. import harness
        from ..run.session import evaluate_and_score
        from ..store import append_traces

        o = self.o
        wls = (o.feedback_select or (lambda p: p.smallest_workloads(1)))(problem)
        cfg = harness.EvalConfig(device=o.device, workloads=[w.uuid for w in wls],
                                 iters=o.feedback_iters)
        with self.eval_lock:
            try:
                traces = evaluate_and_score(problem, c.solution, cfg)
            except Exception as e:  # noqa: BLE001 - a harness failure is feedback too, not a crash
                return {"verdict": f"the evaluation failed: {type(e).__name__}: {e}", "log": "",
                        "statuses": {}}
            for t in traces:
                t.evaluation.solution_hash = c.solution_hash
            append_traces(o.out / FEEDBACK_FILE, traces)
        with self.lock:
            self.result.feedback_evaluations += 1
        return verdict_of(traces)


def verdict_of(traces) -> dict:
    """The feedback of a turn: one line per workload (axes, status, errors, times, speedup) and
    the evaluation logs (at most 4,000 characters)."""
    from ..report.summary import trace_speedup

    lines, logs, statuses = [], [], {}
    for t in traces:
        ev = t.evaluation
        statuses[ev.status.value] = statuses.get(ev.status.value, 0) + 1
        axes = ", ".join(f"{k}={v}" for k, v in t.workload.axes.items())
        s = f"workload ({axes}): {ev.status.value}"
        if ev.correctness is not None and ev.status.value != "PASSED":
            s += (f"; max abs error {ev.correctness.max_absolute_error}, max rel error "
                  f"{ev.correctness.max_relative_error}")
        sp = trace_speedup(t)
        if ev.performance is not None:
            s += f"; your time {ev.performance.latency_ms:.4g} ms"
            if ev.performance.reference_latency_ms:
                s += f", reference {ev.performance.reference_latency_ms:.4g} ms"
        if sp is not None:
            s += f"; speedup {sp:.3g}x"
        hacks = [f.check for f in ev.findings if f.severity in ("hack", "fail")]
        if hacks:
            s += f"; findings: {', '.join(hacks)}"
        lines.append(s)
        if ev.log.strip():
            logs.append(ev.log.strip())
    return {"verdict": "\n".join(lines) or "no workload was evaluated",
            "log": "\n".join(logs)[-4000:], "statuses": statuses}


def _config_json(cfg: ModelConfig, rec: dict) -> dict:
    return {"model": cfg.model, "temperature": cfg.temperature, "sample": cfg.sample,
            "turn": cfg.turn, "language": rec.get("language"), "status": rec.get("status")}


def _read_log(path: Path) -> dict | None:
    """A stored exchange that holds a reply outcome, else None (absent, or cut off mid-write:
    the write is atomic, so a partial file is not expected, but an unreadable one is asked
    again rather than trusted)."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("status") not in GEN_STATUSES or "answer" not in rec:
        return None
    if rec["status"] == "API_ERROR":
        return None  # no reply came (rate limit or server errors after every retry): ask again
    return rec


def _check_name(problem: Problem) -> None:
    """A problem's name is a folder of OUT: one path component, never ``..`` or absolute (a
    definition named ``../../x`` would have its candidates and exchanges written outside)."""
    n = problem.name
    if not n or n in (".", "..") or "/" in n or "\\" in n or "\0" in n:
        where = problem.path / "definition.json" if problem.path.is_dir() else problem.path
        raise SpecError(where, "name", f"{n!r} is not a plain name (a folder of the output)")


def _config_prefix(model: str, temperature: float | None) -> str:
    """The label prefix shared by every sample and turn of (model, temperature)."""
    lab = ModelConfig(model, temperature, 0, 1).label()
    return lab[: -len("0.t1")]


def existing_generation(out: Path, model: str | None = None,
                        temperature: float | None = None) -> bool:
    """Whether ``out`` already holds generated exchanges (of ``model`` at ``temperature`` when
    a model is named: another model's candidates in the same folder are no conflict)."""
    if not Path(out).is_dir():
        return False
    pattern = "*" if model is None else f"{glob_escape(_config_prefix(model, temperature))}*"
    return any(Path(out).glob(f"*/{LOG_DIR}/{pattern}.json"))


def glob_escape(s: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in s)


class _FolderLock:
    """An exclusive lock on (OUT, model configuration) for the life of one generate run: a
    second run of the same configuration on the same folder would send every request twice
    and race on the candidate files. ``flock`` is released by the kernel when the process
    dies, so a killed run leaves no stale lock. ``wait``: block until free (short critical
    sections such as study.json's update) instead of refusing."""

    def __init__(self, out: Path, prefix: str, wait: bool = False):
        self.path = out / f".{prefix[:-2]}.lock"
        self.fd: int | None = None
        self.wait = wait

    def __enter__(self):
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.read(self.fd, 64).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise SpecError(self.path.parent, "", f"another solbench generate (pid {holder}) is "
                                                  "writing this model configuration here; wait for "
                                                  "it or use another folder") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, str(os.getpid()).encode())
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock


def generate(problem_paths: list[Path], opts: GenerateOptions, *, client: ChatClient | None = None,
             agent: AgentRunner | None = None,
             on_event: Callable[[str, str, dict], None] | None = None) -> GenerateResult:
    """Generate ``opts.samples`` chains of ``opts.turns`` candidates for every problem (module
    docstring), ``opts.concurrency`` chains at a time. Exactly one of ``client`` and
    ``agent``. ``on_event(problem, label, info)`` after each candidate is written.

    Raises SpecError when a problem does not load, ``out`` holds an earlier generation and
    ``resume`` is off, or the options are out of range. A bad reply is never raised: it is a
    recorded status (GEN_STATUSES)."""
    o = opts
    if (client is None) == (agent is None):
        raise ValueError("give exactly one of client and agent")
    for name, v, lo in (("--samples", o.samples, 1), ("--turns", o.turns, 1),
                        ("--concurrency", o.concurrency, 1)):
        if v < lo:
            raise SpecError(None, name, f"must be >= {lo}, got {v}")
    if o.language not in prompts.LANGUAGES:
        raise SpecError(None, "--language", f"{o.language!r} not in {list(prompts.LANGUAGES)}")
    ModelConfig(o.model, o.temperature).label()  # validates model name and temperature
    longest = ModelConfig(o.model, o.temperature, o.samples - 1, o.turns).label()
    if len(longest.encode()) > MAX_LABEL_BYTES:
        # a file name holds 255 bytes; the atomic write's temporary name adds about 40
        raise SpecError(None, "--model", f"{o.model[:40]!r}...: its label {longest[:40]}... is "
                                         f"{len(longest.encode())} bytes, too long for a file name "
                                         f"({MAX_LABEL_BYTES} at most)")
    problems = [load_problem(p) for p in problem_paths]
    for p in problems:
        _check_name(p)
    o.out.mkdir(parents=True, exist_ok=True)
    with _FolderLock(o.out, _config_prefix(o.model, o.temperature)):
        if existing_generation(o.out, o.model, o.temperature) and not o.resume:
            raise SpecError(o.out, "", f"holds an earlier generation of {o.model!r} at this "
                                       "temperature; pass --resume to continue it (stored replies "
                                       "are never asked again) or choose a new folder")
        return _generate(problems, o, client, agent, on_event)


def _generate(problems: list[Problem], o: GenerateOptions, client, agent, on_event) -> GenerateResult:
    _record_run(o, problems)
    study = _Study(o, client, agent, on_event)
    errors: list[BaseException] = []
    pool = ThreadPoolExecutor(max_workers=o.concurrency)
    futs = [pool.submit(study.chain, p, s) for p in problems for s in range(o.samples)]
    wait = True
    try:
        for f in as_completed(futs):
            e = f.exception()
            if e is not None:
                errors.append(e)
                if isinstance(e, EndpointError):  # every request would fail the same way
                    wait = False
                    break
    except BaseException:  # KeyboardInterrupt: leave the requests in flight, keep what is stored
        wait = False
        raise
    finally:
        pool.shutdown(wait=wait, cancel_futures=not wait)
    if errors:
        raise errors[0]
    return study.result


def _record_run(o: GenerateOptions, problems: list[Problem]) -> None:
    p = o.out / "study.json"
    with _FolderLock(o.out, "study.json.s", wait=True):  # runs of other models may share OUT
        _update_study_json(p, o, problems)


def _update_study_json(p: Path, o: GenerateOptions, problems: list[Problem]) -> None:
    from .. import __version__

    try:
        data = json.loads(p.read_text())
        runs = data["runs"] if isinstance(data, dict) and isinstance(data.get("runs"), list) else []
    except (OSError, ValueError):
        runs = []
    runs.append({"started": time.time(), "solbench": __version__, "model": o.model,
                 "endpoint": o.endpoint, "temperature": o.temperature, "samples": o.samples,
                 "turns": o.turns, "language": o.language, "resume": o.resume,
                 "problems": [{"name": x.name, "path": str(x.path), "kind": x.kind} for x in problems]})
    _atomic_write(p, json.dumps({"runs": runs}, indent=1, allow_nan=False))
