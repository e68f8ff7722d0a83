"""Reaching a model: an OpenAI-compatible chat endpoint (the ``openai`` client) or an external
agent command. Both return an :class:`Answer` and never raise for a bad reply: every outcome
is a status with its evidence, and every attempt is recorded.

Chat endpoint: one ``POST /chat/completions`` per attempt through ``openai.OpenAI`` with its own
retries off (``max_retries=0``), so that each attempt is seen and stored. Rate limits (HTTP 429),
server errors (5xx), connection errors and timeouts are retried up to ``retries`` times after a
delay of ``backoff_s * 2**i`` (at most ``max_backoff_s``), or the server's ``Retry-After`` when
it sends one (capped the same way). HTTP 401, 403 and 404 (key, endpoint, model name) stop
the run (:class:`EndpointError`); other HTTP errors (400, ...) are recorded, not retried.
A 200 reply whose body is not the chat completion JSON is ``MALFORMED_REPLY``.

Agent command: ``CMD PROBLEM_PATH SOLUTION_PATH`` (CMD split as a shell would), with
``SOLBENCH_PROBLEM``, ``SOLBENCH_SOLUTION``, ``SOLBENCH_TURN`` and, from the second turn,
``SOLBENCH_FEEDBACK`` (a file holding the last attempt's verdict and log) in its environment.
It writes its solution to SOLUTION_PATH (or the same stem with the other suffix: a
solution.json where a ``.py`` was named, or back); its exit status, stdout and stderr (the last 20,000
characters of each) are recorded. It runs in its own session and is killed, with every
process it started, at the timeout.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SolbenchError

#: outcome of one request to the model (the log's ``status`` before code extraction)
ANSWERED, TIMEOUT, API_ERROR, MALFORMED_REPLY, AGENT_ERROR = (
    "ANSWERED", "TIMEOUT", "API_ERROR", "MALFORMED_REPLY", "AGENT_ERROR")


@dataclass
class Answer:
    """What one request produced: ``status`` (ANSWERED, TIMEOUT, API_ERROR, MALFORMED_REPLY,
    AGENT_ERROR), the reply's text content (None when there is none), token usage as the
    endpoint reported it, every attempt (start time, seconds, HTTP status, error), the raw
    body of the last reply and a one-line ``message``."""

    status: str
    content: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    raw: str | None = None
    finish_reason: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "content": self.content, "usage": self.usage,
                "attempts": self.attempts, "raw": self.raw, "finish_reason": self.finish_reason,
                "message": self.message}


class EndpointError(SolbenchError):
    """The endpoint refused the run itself (HTTP 401, 403, 404: key, endpoint or model name)."""


def _retry_after(headers) -> float | None:
    try:
        v = headers.get("retry-after") if headers is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


class ChatClient:
    """An OpenAI-compatible chat endpoint (module docstring). Thread-safe: one ``openai``
    client shared by the generation threads."""

    def __init__(self, base_url: str | None, api_key: str | None, *, timeout_s: float = 600.0,
                 retries: int = 4, backoff_s: float = 2.0, max_backoff_s: float = 60.0,
                 max_tokens: int | None = None, max_reply_bytes: int = 32 << 20):
        try:
            import openai
        except ImportError:
            raise SolbenchError("the openai client is not installed: pip install 'solbench[study]'") from None
        self._openai = openai
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "EMPTY",
                                    timeout=timeout_s, max_retries=0)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_tokens = max_tokens
        self.max_reply_bytes = max_reply_bytes

    def request_body(self, model: str, messages: list[dict], temperature: float | None) -> dict:
        body: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None:
            body["temperature"] = temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def ask(self, model: str, messages: list[dict], temperature: float | None) -> Answer:
        """One chat completion, retried as the module docstring says. Raises nothing."""
        oa = self._openai
        body = self.request_body(model, messages, temperature)
        attempts: list[dict[str, Any]] = []
        for i in range(self.retries + 1):
            t0 = time.time()
            rec: dict[str, Any] = {"started": t0}
            attempts.append(rec)
            retry_after = None
            try:
                http_status, data = self._post(body, t0)
            except (oa.APITimeoutError, _Deadline):
                rec.update(elapsed_s=round(time.time() - t0, 3), error=f"timeout after {self.timeout_s:g} s")
                outcome = Answer(TIMEOUT, attempts=attempts,
                                 message=f"no reply within {self.timeout_s:g} s ({i + 1} attempts)")
            except (oa.APIConnectionError, _Broken) as e:
                rec.update(elapsed_s=round(time.time() - t0, 3), error=f"connection: {e}")
                outcome = Answer(API_ERROR, attempts=attempts, message=f"connection error: {e}")
            except oa.APIStatusError as e:
                code = e.status_code
                rec.update(elapsed_s=round(time.time() - t0, 3), http_status=code,
                           error=str(e)[:2000])
                retry_after = _retry_after(getattr(e.response, "headers", None))
                outcome = Answer(API_ERROR, attempts=attempts, raw=_text(e.response),
                                 message=f"HTTP {code}: {str(e)[:300]}")
                if code in (401, 403, 404):
                    # a wrong key, endpoint or model name: the run's configuration, not the
                    # model's answer; stop before every problem records the same error
                    raise EndpointError(f"{self.client.base_url}: HTTP {code} for model {model!r}: "
                                        f"{str(e)[:300]}") from None
                if not (code == 429 or code >= 500):
                    return outcome
            else:
                rec.update(elapsed_s=round(time.time() - t0, 3), http_status=http_status)
                return self._parse(data, attempts)
            if i < self.retries:
                delay = min(self.max_backoff_s, retry_after if retry_after is not None
                            else self.backoff_s * 2 ** i)
                rec["retry_in_s"] = delay
                time.sleep(max(0.0, delay))
        return outcome

    def _post(self, body: dict, t0: float) -> tuple[int, bytes]:
        """POST the request and read the body as it streams in, within ``timeout_s`` in all
        (the client's own timeout bounds each read, so a server that trickles bytes forever
        would pass it) and ``max_reply_bytes``. Raises _Deadline past the time; a longer body
        is cut there (then it is not JSON: MALFORMED_REPLY with the size)."""
        with self.client.chat.completions.with_streaming_response.create(**body) as resp:
            buf = bytearray()
            try:
                for chunk in resp.iter_bytes():
                    buf += chunk
                    if time.time() - t0 > self.timeout_s:
                        raise _Deadline()
                    if len(buf) > self.max_reply_bytes:
                        break
            except (_Deadline, self._openai.APIError):
                raise
            except Exception as e:  # noqa: BLE001 - the transport's own (httpx or httpx2) errors
                if "timeout" in type(e).__name__.lower():
                    raise _Deadline() from e
                raise _Broken(f"{type(e).__name__}: {e}") from e
            return resp.status_code, bytes(buf)

    def _parse(self, data: bytes, attempts) -> Answer:
        text = data[:200_000].decode("utf-8", errors="replace")
        if len(data) > self.max_reply_bytes:
            return Answer(MALFORMED_REPLY, attempts=attempts, raw=text,
                          message=f"reply over {self.max_reply_bytes} bytes: not read further")
        try:
            comp = self._openai.types.chat.ChatCompletion.model_validate(json.loads(data))
            choice = comp.choices[0]
            content = choice.message.content
            usage = comp.usage.model_dump() if getattr(comp, "usage", None) is not None else {}
        except Exception as e:  # noqa: BLE001 - any body that is not a completion
            return Answer(MALFORMED_REPLY, attempts=attempts, raw=text,
                          message=f"reply is not a chat completion: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0][:200] if str(e) else ''}")
        if not isinstance(content, str):
            return Answer(MALFORMED_REPLY, attempts=attempts, raw=text, usage=usage,
                          message="reply has no message content")
        return Answer(ANSWERED, content=content, usage=usage, attempts=attempts, raw=text,
                      finish_reason=getattr(choice, "finish_reason", None), message="answered")


class _Deadline(Exception):
    """The whole reply did not arrive within the request's timeout."""


class _Broken(Exception):
    """The connection failed while the reply's body was read."""


def _text(resp) -> str | None:
    try:
        return resp.text[:200_000] if resp is not None else None
    except Exception:  # noqa: BLE001 - a body that cannot be read as text
        return None


class AgentRunner:
    """An external agent command (module docstring)."""

    def __init__(self, cmd: str, timeout_s: float = 600.0):
        self.argv = shlex.split(cmd)
        if not self.argv:
            raise ValueError("--agent-cmd is empty")
        self.timeout_s = timeout_s

    def run(self, problem_path: Path, solution_path: Path, turn: int,
            feedback_path: Path | None) -> Answer:
        env = dict(os.environ, SOLBENCH_PROBLEM=str(problem_path),
                   SOLBENCH_SOLUTION=str(solution_path), SOLBENCH_TURN=str(turn))
        if feedback_path is not None:
            env["SOLBENCH_FEEDBACK"] = str(feedback_path)
        argv = self.argv + [str(problem_path), str(solution_path)]
        t0 = time.time()
        rec: dict[str, Any] = {"started": t0, "argv": argv}
        # stdout and stderr go to files, not pipes: an agent printing gigabytes costs disk, not
        # the generator's memory, and a process it left behind in a session of its own cannot
        # hold a pipe open and keep the run waiting after the agent itself has exited
        with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
            try:
                p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                     start_new_session=True)
            except OSError as e:
                rec.update(elapsed_s=0.0, error=str(e))
                return Answer(AGENT_ERROR, attempts=[rec], message=f"cannot start {argv[0]}: {e}")
            timed_out = False
            try:
                p.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(p)
                p.wait()
            out, err = _tail(fo), _tail(fe)
        rec.update(elapsed_s=round(time.time() - t0, 3), stdout=out, stderr=err)
        if timed_out:
            rec["error"] = "timeout"
            return Answer(TIMEOUT, attempts=[rec], message=f"agent ran past {self.timeout_s:g} s")
        rec["returncode"] = p.returncode
        if p.returncode != 0:
            tail = (err.strip().splitlines() or [""])[-1][:300]
            return Answer(AGENT_ERROR, attempts=[rec],
                          message=f"agent exited with status {p.returncode}: {tail}")
        return Answer(ANSWERED, attempts=[rec], message="agent finished")


def _tail(f, n: int = 20000) -> str:
    """The last ``n`` characters of an agent's output file (any bytes: undecodable ones are
    replaced)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - 4 * n))
    return f.read().decode("utf-8", errors="replace")[-n:]


_KILL_LOCK = threading.Lock()


def _kill_group(p: subprocess.Popen) -> None:
    """Kill the agent's whole session (it was started with its own), ignoring one already gone."""
    with _KILL_LOCK:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
