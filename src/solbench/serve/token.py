"""The service's bearer token: where it comes from, and the checks on a bind address.

A candidate submitted to ``solbench serve`` runs sandboxed, but the *problem* it names does
not: its reference runs in the server's own process (the trusted oracle). So whoever can
reach the port can make the server import any problem under its allowed roots and run code
under the server's user in the sandbox. The token keeps that to whoever can read it.

Sources, first found wins: ``$SOLBENCH_SERVE_TOKEN``; the file ``--token-file`` names; the
default file ``serve.token`` in the trace key's folder (:func:`solbench.store.auth.key_dir`,
which the sandbox hides from candidates), created with a fresh 256-bit token, mode 0600.
A token file readable by group or others is refused (one line naming it), as the trace key is.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
import stat
from pathlib import Path

from .. import paths
from ..errors import SolbenchError

#: environment variable holding the token (the server's and the client's)
TOKEN_ENV = paths.SERVE_TOKEN
TOKEN_FILE = "serve.token"


class TokenError(SolbenchError):
    """The token file is unsafe (group/other-readable, not ours) or unreadable."""


def default_token_path() -> Path:
    from ..store.auth import key_dir

    return key_dir() / TOKEN_FILE


def read_token_file(path: Path) -> str:
    """The token in ``path`` (stripped). Raises TokenError when the file is readable by group
    or others, owned by another user, or empty."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise TokenError(f"{path}: {e.strerror or e}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"{path}: token file must be mode 0600 (chmod 600 {path}), "
                         f"is {stat.S_IMODE(st.st_mode):04o}")
    if st.st_uid != os.getuid():
        raise TokenError(f"{path}: token file is owned by uid {st.st_uid}, not this user")
    tok = Path(path).read_text().strip()
    if len(tok) < 16:
        raise TokenError(f"{path}: token must be at least 16 characters")
    return tok


def server_token(token_file: Path | None = None) -> tuple[str, str]:
    """(token, where it came from: ``$SOLBENCH_SERVE_TOKEN`` or the file's path). Creates the
    default file (0600, its folder 0700) when no token is set anywhere. Raises TokenError."""
    env = paths.serve_token()
    if env:
        if len(env) < 16:
            raise TokenError(f"${TOKEN_ENV}: token must be at least 16 characters")
        return env, f"${TOKEN_ENV}"
    path = Path(token_file) if token_file is not None else default_token_path()
    if token_file is None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return read_token_file(path), str(path)


def client_token(token: str | None = None) -> str | None:
    """The token a client sends: ``token``, else ``$SOLBENCH_SERVE_TOKEN``, else the default
    file's when it exists and is safe, else None (a server without a token accepts that)."""
    if token:
        return token
    env = paths.serve_token()
    if env:
        return env
    path = default_token_path()
    if path.exists():
        try:
            return read_token_file(path)
        except TokenError:
            return None
    return None


def token_ok(expected: str | None, header: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``expected`` (``Bearer <token>``):
    compared in constant time (:func:`hmac.compare_digest`), so the time to refuse a guess
    does not tell how many of its leading characters were right. True when no token is
    required (``expected`` None)."""
    if expected is None:
        return True
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), expected.encode())


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on loopback only: ``localhost``, 127.0.0.0/8 or
    ``::1``. Any other name or address (``0.0.0.0``, a LAN address, a host name) is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:  # a name: loopback only if every address it resolves to is
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
