"""A small client of ``solbench serve`` (stdlib only: it needs no extra).

    from solbench.serve.client import ServeClient
    c = ServeClient("http://127.0.0.1:8765")          # token: $SOLBENCH_SERVE_TOKEN or the default file
    traces = c.evaluate("l1/relu_fp32", "cand.py", workloads=[0], seed=7)
    traces[0].evaluation.status                       # the Trace solbench eval would write

:func:`evaluate_remote` is what ``solbench eval --server URL`` calls: the same problem,
solution and :class:`~solbench.harness.EvalConfig` it would hand the local pipeline.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from .. import limits
from ..errors import SolbenchError
from .token import client_token


class ServeError(SolbenchError):
    """The server refused a request or could not be reached: ``status`` is the HTTP status
    (0: no answer), the message the server's one line."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ServeClient:
    """``url``: the server's base URL (``http://127.0.0.1:8765``). ``token``: sent as
    ``Authorization: Bearer``; default ``$SOLBENCH_SERVE_TOKEN``, else the default token
    file (:func:`solbench.serve.token.default_token_path`) when it exists. ``client``: the
    name the fair queue knows this submitter by. ``timeout_s``: limit of one HTTP exchange."""

    def __init__(self, url: str, token: str | None = None, client: str = "default",
                 timeout_s: float = limits.SERVE_HTTP_S):
        if not url.startswith(("http://", "https://")):
            raise ServeError(0, f"--server: {url!r} is not an http:// or https:// URL "
                                "(e.g. http://127.0.0.1:8765)")
        self.url = url.rstrip("/")
        self.token = client_token(token)
        self.client = client
        self.timeout_s = timeout_s

    # ------------------------------------------------------------ HTTP
    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read()).get("error") or e.reason
            except Exception:  # noqa: BLE001 - a body that is not ours
                msg = e.reason
            raise ServeError(e.code, f"{self.url}: {e.code}: {msg}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ServeError(0, f"{self.url}: no answer ({reason}); is `solbench serve` running?") from None

    def health(self) -> dict:
        return self._call("GET", "/v1/health")

    def status(self) -> dict:
        return self._call("GET", "/v1/status")

    def submit(self, request: dict[str, Any]) -> dict:
        """Queue an evaluation (the fields of :class:`~.api.EvalRequest`); the job as
        :class:`~.api.JobView`."""
        return self._call("POST", "/v1/jobs", {"client": self.client, **request})

    def job(self, job_id: str, after: int = 0, wait: float = 0.0, stages: int = 0) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}?after={after}&wait={wait}&stages={stages}")

    def cancel(self, job_id: str) -> dict:
        return self._call("DELETE", f"/v1/jobs/{job_id}")

    def follow(self, request: dict[str, Any], on_trace: Callable | None = None,
               on_stage: Callable[[str], None] | None = None) -> list:
        """Submit ``request`` and wait for its traces, each passed to ``on_trace`` as a
        :class:`~solbench.spec.Trace` as soon as it is finished. Returns them all. Raises
        ServeError when the server refuses the request or the job fails."""
        from ..spec.trace import Trace

        job = self.submit(request)
        traces: list = []
        n_stages = 0
        while True:
            view = self.job(job["id"], after=len(traces), wait=limits.SERVE_POLL_S, stages=n_stages)
            for line in view["stages"][n_stages:]:
                if on_stage is not None:
                    on_stage(line)
            n_stages = len(view["stages"])
            for d in view["traces"]:
                t = Trace.model_validate(d)
                traces.append(t)
                if on_trace is not None:
                    on_trace(t)
            if view["state"] == "failed":
                raise ServeError(500, f"{self.url}: job {job['id']} failed: {view['error']}")
            if view["state"] == "cancelled":
                raise ServeError(409, f"{self.url}: job {job['id']} was cancelled")
            if view["state"] == "done" and len(traces) >= view["n_traces"]:
                return traces

    def evaluate(self, problem: str | Path, solution=None, *, workloads: list | None = None,
                 on_trace: Callable | None = None, **options) -> list:
        """Evaluate ``solution`` (a path to ``solution.json`` or a candidate ``.py``, a
        :class:`~solbench.spec.Solution`, or None for the reference) on ``problem`` (a path
        or a bundled name). ``workloads``: indices or uuids (default all); ``options``: the
        other fields of :class:`~.api.EvalRequest` (``seed``, ``device``, ``rounds``,
        ``timing``, ...). Returns the Traces."""
        from ..spec import Solution, load_problem, load_solution
        from ..suites import resolve_problem

        path = Path(resolve_problem(problem)).resolve()
        prob = load_problem(path)
        if solution is not None and not isinstance(solution, Solution):
            solution = load_solution(Path(solution), prob)
        if workloads is not None:
            workloads = [prob.workloads[w].uuid if isinstance(w, int) else str(w) for w in workloads]
        req = {"problem": str(path), "workloads": workloads,
               "solution": None if solution is None else solution.model_dump(mode="json"), **options}
        return self.follow(req, on_trace=on_trace)


def request_from_config(problem, solution, cfg, hardware: str | None = None,
                        sol_model: str = "refined", *, server_device: bool = False) -> dict[str, Any]:
    """The request that asks the server for what ``evaluate_and_score(problem, solution,
    cfg, hardware, sol_model)`` does here: the problem's resolved path, the solution as JSON
    (the reference's too, so the server judges exactly what was loaded here) and every
    setting ``solbench eval`` sets from its flags. ``server_device``: ask for the server's
    default device instead of ``cfg.device`` (whose device then only stands for it in the
    settings sent as "the default"). Imports neither torch nor the harness."""
    from ..config import EvalConfig

    default = EvalConfig(device=cfg.device)
    return {
        "problem": str(Path(problem.path).resolve()),
        "solution": solution.model_dump(mode="json"),
        "workloads": list(cfg.workloads) if cfg.workloads is not None else None,
        "device": None if server_device else cfg.device, "rounds": cfg.rounds, "iters": cfg.iters, "timing": cfg.timing,
        "seed": cfg.seed, "keep_going": cfg.keep_going,
        "first_call_timeout_s": cfg.first_call_timeout_s
        if cfg.first_call_timeout_s != default.first_call_timeout_s else None,
        "call_timeout_s": cfg.call_timeout_s,
        "build_timeout_s": cfg.build_timeout_s if cfg.build_timeout_s != default.build_timeout_s else None,
        "hardware": hardware, "sol_model": sol_model,
    }


def evaluate_remote(url: str, problem, solution, cfg, *, hardware: str | None = None,
                    sol_model: str = "refined", on_trace: Callable | None = None,
                    on_stage: Callable[[str], None] | None = None, server_device: bool = False) -> list:
    """What ``solbench eval --server URL`` calls in place of
    :func:`solbench.run.session.evaluate_and_score`: the same arguments, the same Traces, from
    the server at ``url``; ``server_device`` as in :func:`request_from_config`. Raises ServeError."""
    c = ServeClient(url)
    return c.follow(request_from_config(problem, solution, cfg, hardware, sol_model, server_device=server_device),
                    on_trace=on_trace, on_stage=on_stage)


__all__ = ["ServeClient", "ServeError", "evaluate_remote", "request_from_config"]
