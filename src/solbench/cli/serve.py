"""``solbench serve``: the warm evaluation service (docs/serve.md)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .common import check_device, check_output, clean_errors, fail, parse_bytes

EXTRA_HINT = "solbench serve needs the serve extra: pip install 'solbench[serve]' (fastapi, uvicorn)"


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (anything but "
                                                             "loopback needs the token)"),
        port: int = typer.Option(8765, "--port", help="port (0: a free one, printed)"),
        device: Optional[str] = typer.Option(None, "--device",
                                             help="device of a request that names none (default: "
                                                  "cuda when present)"),
        roots: Optional[List[Path]] = typer.Option(None, "--root",
                                                   help="folder whose problems may be evaluated "
                                                        "(repeatable; default: the current folder; "
                                                        "the bundled suites always)"),
        token_file: Optional[Path] = typer.Option(None, "--token-file",
                                                  help="file (mode 0600) holding the bearer token "
                                                       "(default: $SOLBENCH_SERVE_TOKEN, else "
                                                       "serve.token in the trace key's folder, made "
                                                       "on first use)"),
        no_token: bool = typer.Option(False, "--no-token",
                                      help="accept requests without a token (loopback only)"),
        spares: int = typer.Option(3, "--spares",
                                   help="workers kept started ahead of need per device (the "
                                        "first evaluation of a problem takes two: candidate "
                                        "and reference)"),
        max_problems: int = typer.Option(16, "--max-problems",
                                         help="problems whose state (reference, workers, bounds) is kept"),
        max_body: str = typer.Option("16M", "--max-body", help="largest request body"),
        output: Optional[Path] = typer.Option(None, "-o", "--output",
                                              help="also append every trace (signed) to this results file"),
    ) -> None:
        """Serve evaluations over HTTP to `solbench eval --server URL` and the Python client:
        sandboxed workers started ahead of need, per-problem state kept, one evaluation at a
        time per device, queued fairly across clients."""
        try:
            import fastapi  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            fail(EXTRA_HINT)
        from ..serve.token import TokenError, is_loopback, server_token

        if not 0 <= port <= 65535:
            fail(f"--port: {port} is not a port number")
        if spares < 0:
            fail(f"--spares: must be >= 0, got {spares}")
        if max_problems < 1:
            fail(f"--max-problems: must be >= 1, got {max_problems}")
        limit = parse_bytes(max_body, "--max-body")
        check_output(output)
        for r in roots or []:
            if not r.is_dir():
                fail(f"--root: {r}: no such directory")
        loopback = is_loopback(host)
        if no_token and not loopback:
            fail(f"--no-token: refused for --host {host}, which is not loopback: a token is "
                 "required for anything but 127.0.0.1/::1")
        token, where = None, None
        if not no_token:
            try:
                token, where = server_token(token_file)
            except TokenError as e:
                fail(str(e))
        dev = check_device(device)

        import socket

        from . import lifetime
        from ..serve.app import make_server
        from ..serve.service import Service

        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(fam, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            fail(f"--host/--port: cannot listen on {host}:{port}: {e.strerror or e}")
        sock.listen(128)  # connections wait in the backlog from the moment the line is printed
        bound = sock.getsockname()[1]
        lifetime.arm_watchdog()
        with clean_errors():
            service = Service(list(roots or [Path.cwd()]), dev, spares=spares,
                              max_problems=max_problems, output=output)
            service.warm()
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"solbench serve: listening on http://{shown}:{bound} (device {dev}; "
                   + (f"token: {where}" if token else "no token") + "; "
                   + f"roots: {', '.join(map(str, service.roots))})", err=False)
        import sys

        sys.stdout.flush()
        server = make_server(service, token, max_body=limit)
        try:
            server.run(sockets=[sock])
        finally:
            service.close()
