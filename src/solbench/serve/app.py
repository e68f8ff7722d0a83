"""The HTTP layer of ``solbench serve`` (FastAPI on uvicorn): routes, the bearer-token check,
the request-size bound and the error format. docs/serve.md documents every endpoint.

Errors are ``{"error": "<one line>"}`` with the status: 400 a bad field, 401 no or wrong
token, 403 a path outside the allowed roots, 404 no such job or problem, 409 cancelling a
job that is not queued, 413 a body over the bound, 429 too many jobs (or request bytes)
queued for one client or for all, 503 shutting down.
"""

from __future__ import annotations

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from .. import __version__, limits
from .api import EvalRequest
from .service import FINAL, RequestError, Service
from .token import token_ok

#: longest a ``GET /v1/jobs/{id}?wait=`` holds the request open (s)
MAX_WAIT_S = 30.0
#: long-polls waiting at once, each in a thread of its own pool (more wait for a thread)
MAX_WAITING = 128


def make_app(service: Service, token: str | None, max_body: int = 16 << 20) -> FastAPI:
    """The app serving ``service``. ``token``: the bearer token every request must carry
    (None: none required; the CLI allows that on a loopback bind only). ``max_body``: the
    most bytes a request body may have (413 beyond)."""

    def auth(request: Request) -> None:
        if not token_ok(token, request.headers.get("authorization")):
            raise RequestError(401, "missing or wrong token (Authorization: Bearer <token>; "
                                    "the server printed where its token is)")

    # no schema route: it would answer without the token (a route of its own, outside the
    # dependencies), and the API is docs/serve.md's
    app = FastAPI(title="solbench serve", version=__version__, dependencies=[Depends(auth)],
                  docs_url=None, redoc_url=None, openapi_url=None)
    # a long-poll blocks a thread for up to MAX_WAIT_S: in the pool every sync route and
    # submit share (40 threads), 40 followers would hold every other request that long
    waiting = anyio.CapacityLimiter(MAX_WAITING)

    @app.exception_handler(RequestError)
    async def _refused(request: Request, e: RequestError):
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        return JSONResponse({"error": e.message}, status_code=e.status, headers=headers)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException):  # an unknown route or method
        return JSONResponse({"error": f"{request.method} {request.url.path}: {e.detail}"},
                            status_code=e.status_code, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_param(request: Request, e: RequestValidationError):  # a bad query parameter
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ())[1:])
        return JSONResponse({"error": f"{loc}: {err.get('msg')}"}, status_code=400)

    @app.get("/v1/health")
    def health() -> dict:
        return {"ok": not service.closing, "version": __version__}

    @app.get("/v1/status")
    def status() -> dict:
        return service.status()

    @app.post("/v1/jobs", status_code=202)
    async def submit(request: Request) -> dict:
        body = await _read_body(request, max_body)
        try:
            req = EvalRequest.model_validate_json(body)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err.get("loc", ()))
            raise RequestError(400, f"{loc}: {err.get('msg')}" if loc else str(err.get("msg"))) from None
        job = await run_in_threadpool(service.submit, req)
        return job.view(position=service.position(job)).model_dump(mode="json")

    @app.get("/v1/jobs/{job_id}")
    async def get_job(job_id: str, after: int = 0, wait: float = 0.0, stages: int = 0) -> dict:
        """``after``: traces already fetched (only later ones come back); ``wait``: hold the
        request up to this many seconds (at most 30) until a new trace or stage line, or the
        end; ``stages``: stage lines already seen."""
        job = service.job(job_id)
        if wait > 0:
            await anyio.to_thread.run_sync(job.wait, after, stages, min(float(wait), MAX_WAIT_S),
                                           limiter=waiting)
            if service.closing and job.state not in FINAL:
                raise RequestError(503, "the server is shutting down")
        return job.view(after, position=service.position(job)).model_dump(mode="json")

    @app.delete("/v1/jobs/{job_id}")
    def cancel(job_id: str) -> dict:
        job = service.job(job_id)
        service.cancel(job)
        return job.view().model_dump(mode="json")

    return app


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` bytes: by its
    declared Content-Length before a byte is read, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            n = int(declared)
        except ValueError:
            raise RequestError(400, "Content-Length is not a number") from None
        if n > limit:
            raise RequestError(413, f"request body of {n:,} bytes exceeds the server's "
                                    f"{limit:,} (--max-body)")
    chunks, got = [], 0
    async for chunk in request.stream():
        got += len(chunk)
        if got > limit:
            raise RequestError(413, f"request body exceeds the server's {limit:,} bytes (--max-body)")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body:
        raise RequestError(400, "empty body: expected a JSON evaluation request")
    return body


#: seconds a connection may take to send a request's head (request line and headers), from its
#: opening or from the end of its previous response; a slower one is closed
HEAD_TIMEOUT_S = 10.0


def make_server(service: Service, token: str | None, max_body: int = 16 << 20,
                head_timeout_s: float = HEAD_TIMEOUT_S):
    """The uvicorn server of ``make_app(service, token, max_body)``; run it with
    ``.run(sockets=[sock])``.

    Slow clients: uvicorn has no bound on the time a request's head may take, and its
    connection bound (``limit_concurrency``) counts connections that have sent no request yet,
    so 128 clients trickling header lines, with no token, would have every other client
    answered 503. Here a connection whose head is not complete ``head_timeout_s`` after it
    opened (or after its previous response) is closed, and there is no connection bound: what
    a connection may hold is bounded by the head's size (64 KiB), the body's (``max_body``)
    and the long-polls' own pool (``MAX_WAITING`` threads). On SIGTERM/Ctrl-C the server first
    ends every long-poll (each answers 503, :meth:`Service.release_waits`), then waits at
    most 2 s for requests in flight."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeoutH11(H11Protocol):
        _head_timer = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_late)

        def _head_late(self) -> None:
            idle = self.cycle is None or self.cycle.response_complete  # no request under way
            if idle and not self.transport.is_closing():
                self.transport.close()

    config = uvicorn.Config(make_app(service, token, max_body), http=HeadTimeoutH11,
                            log_level="warning", access_log=False,
                            timeout_keep_alive=limits.SERVE_KEEP_ALIVE_S,  # an idle connection meets the head timeout first
                            h11_max_incomplete_event_size=64 << 10, timeout_graceful_shutdown=limits.SERVE_GRACEFUL_S)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None):
            service.release_waits()  # long-polls answer 503 now, not at the end of their wait
            await super().shutdown(sockets=sockets)

    return Server(config)


__all__ = ["make_app", "make_server"]
