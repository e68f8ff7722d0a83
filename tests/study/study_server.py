"""A real OpenAI-compatible chat endpoint on loopback for the study tests (no network): a
``ThreadingHTTPServer`` in a thread serving ``POST /v1/chat/completions`` from a script.

The script maps (model, problem name) to a list of behaviours, taken in order, one per request
(the last one repeats):

* ``("reply", text)``: a 200 chat completion whose message content is ``text`` (usage: prompt
  tokens = characters of the messages // 4, completion tokens = characters of text // 4);
* ``("status", code)``: that HTTP error with an OpenAI-style error body (``Retry-After: 0``);
* ``("malformed",)``: a 200 whose body is cut-off JSON;
* ``("slow", seconds, text)``: the reply after sleeping ``seconds``;
* ``("block", threading.Event)``: hold the request until the event is set (or 30 s);
* ``("trickle",)``: a 200 whose JSON body never ends: a byte every 50 ms for 60 s;
* ``("huge", n_bytes)``: a 200 chat completion whose content is ``n_bytes`` of text;
* ``("html",)``: a 200 ``text/html`` page (a proxy's error page).

The problem of a request is the first script problem named in backquotes in its first user
message (the prompts of solbench.study.prompts name it so). Every request is kept in
``requests`` as (model, problem, body).
"""

from __future__ import annotations

import http.server
import json
import threading
import time


def completion(text: str, body: dict) -> dict:
    chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": chars // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": chars // 4 + len(text) // 4}}


class StudyServer:
    def __init__(self, script: dict[tuple[str, str], list[tuple]]):
        self.script = script
        self.requests: list[tuple[str, str, dict]] = []
        self._pos: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests the server held at once
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, payload: bytes, headers: dict | None = None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                beh = outer._next(body)
                with outer._lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    self._serve(beh, body)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1

            def _serve(self, beh, body):
                kind = beh[0]
                if kind == "reply":
                    self._send(200, json.dumps(completion(beh[1], body)).encode())
                elif kind == "status":
                    err = {"error": {"message": f"scripted {beh[1]}", "type": "test", "code": beh[1]}}
                    self._send(beh[1], json.dumps(err).encode(), {"Retry-After": "0"})
                elif kind == "malformed":
                    self._send(200, b'{"id": "x", "choices": [{"message": ')
                elif kind == "slow":
                    time.sleep(beh[1])
                    self._send(200, json.dumps(completion(beh[2], body)).encode())
                elif kind == "block":
                    beh[1].wait(30)
                    self._send(200, json.dumps(completion(beh[2], body)).encode())
                elif kind == "trickle":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    try:
                        self.wfile.write(b'{"id": "x", "choices": [{"message": {"content": "')
                        for _ in range(1200):
                            self.wfile.write(b"a")
                            self.wfile.flush()
                            time.sleep(0.05)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                elif kind == "huge":
                    self._send(200, json.dumps(completion("x" * beh[1], body)).encode())
                elif kind == "html":
                    self._send(200, b"<html><body>502 Bad Gateway</body></html>",
                               {"Content-Type": "text/html"})
                else:  # pragma: no cover - a script error
                    self._send(500, b'{"error": {"message": "bad script"}}')

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _problem_of(self, body: dict) -> str:
        users = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"]
        first = users[0] if users else ""
        names = {p for _, p in self.script}
        hits = [(first.find(f"`{p}`"), p) for p in names if f"`{p}`" in first]
        return min(hits)[1] if hits else "?"

    def _next(self, body: dict) -> tuple:
        key = (body.get("model"), self._problem_of(body))
        with self._lock:
            self.requests.append((key[0], key[1], body))
            seq = self.script.get(key) or [("status", 404)]
            i = self._pos.get(key, 0)
            self._pos[key] = i + 1
        return seq[min(i, len(seq) - 1)]

    def count(self, model: str, problem: str) -> int:
        return sum(1 for m, p, _ in self.requests if m == model and p == problem)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
