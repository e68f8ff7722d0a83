"""Authentication of stored traces: HMAC-SHA256 with a per-user key the candidate cannot read.

Why: the candidate runs code on the same machine while a results file is open. Whatever it
manages to append or edit must be told apart from what the parent wrote. Each line the
parent appends carries ``auth = {"alg": "HMAC-SHA256", "key_id": ..., "mac": ...}``, the MAC
over the line's canonical JSON (:func:`canonical`: the object without ``auth``, keys sorted,
no spaces, no NaN). The key is 32 random bytes (hex) in ``<data dir>/trace.key``, created on
first use with mode 0600; the sandbox hides ``<data dir>`` from the candidate's worker
(``key_dir()``, which is :func:`solbench.paths.data_dir`, names it). ``key_id`` = first 16
hex digits of sha256(key): it names which key signed a line without revealing it.

HMAC: RFC 2104 (Krawczyk, Bellare, Canetti 1997), SHA-256: FIPS 180-4; Python's ``hmac``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Iterable

from .. import paths
from ..errors import SolbenchError

ALG = "HMAC-SHA256"
KEY_FILE = "trace.key"


class KeyError_(SolbenchError):
    """The trace key exists but cannot be trusted or read (wrong mode or owner, bad content)."""


def key_dir() -> Path:
    """Folder holding the trace key: ``$SOLBENCH_DATA_DIR`` if set, else
    ``$XDG_DATA_HOME/solbench``, else ``~/.local/share/solbench`` (:func:`solbench.paths.data_dir`).
    The sandbox hides it."""
    return paths.data_dir()


def key_path() -> Path:
    return key_dir() / KEY_FILE


def _check_and_read(path: Path) -> bytes:
    st = path.stat()
    if st.st_uid != os.getuid():
        raise KeyError_(f"{path}: trace key owned by uid {st.st_uid}, not by this user ({os.getuid()})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise KeyError_(f"{path}: trace key is readable or writable by others (mode "
                        f"{stat.S_IMODE(st.st_mode):04o}); it may be known: delete it (a new one is "
                        "made on the next run) or chmod 600 it if you are sure it is not")
    text = path.read_text().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise KeyError_(f"{path}: trace key is not hex") from None
    if len(key) < 32:
        raise KeyError_(f"{path}: trace key is {len(key)} bytes, needs 32")
    return key


def load_key(create: bool = True) -> bytes | None:
    """This user's trace key (bytes). Created (0600, its folder 0700) when missing and
    ``create``; None when missing and not ``create``. Raises KeyError_ for a key file with
    another owner, a mode open to others, or bad content."""
    path = key_path()
    if path.exists():
        return _check_and_read(path)
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first: use theirs
        return _check_and_read(path)
    except OSError as e:
        raise KeyError_(f"{path}: cannot create the trace key ({e.strerror}); set SOLBENCH_DATA_DIR "
                        "to a private folder you can write") from None
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return _check_and_read(path)


def load_key_file(path: str | Path) -> bytes:
    """A key given explicitly (``--key FILE``, e.g. the device machine's key copied here)."""
    path = Path(path)
    try:
        return bytes.fromhex(path.read_text().strip())
    except OSError as e:
        raise KeyError_(f"{path}: cannot read key: {e.strerror}") from None
    except ValueError:
        raise KeyError_(f"{path}: key is not hex") from None


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def canonical(obj: dict[str, Any]) -> bytes:
    """Canonical JSON of a stored object without its ``auth`` key (sorted keys, compact,
    strict: raises ValueError on NaN/Inf)."""
    body = {k: v for k, v in obj.items() if k != "auth"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False).encode()


def sign(obj: dict[str, Any], key: bytes) -> dict[str, Any]:
    """``obj`` with its ``auth`` block set (a new dict)."""
    mac = hmac.new(key, canonical(obj), hashlib.sha256).hexdigest()
    return {**{k: v for k, v in obj.items() if k != "auth"},
            "auth": {"alg": ALG, "key_id": key_id(key), "mac": mac}}


def verify(obj: dict[str, Any], keys: Iterable[bytes]) -> tuple[str, str]:
    """Check an object's ``auth`` block against the known keys.

    Returns (state, reason): state "verified", "unsigned" (no auth block), "bad_mac" (signed
    by a known key but the content differs: edited, or a MAC made up without the key),
    "unknown_key" (a key_id none of ``keys`` has: another user's or machine's key, or made
    up), "malformed" (auth block of the wrong shape).
    """
    auth = obj.get("auth")
    if auth is None:
        return "unsigned", "no auth block"
    if not (isinstance(auth, dict) and auth.get("alg") == ALG and isinstance(auth.get("mac"), str)
            and isinstance(auth.get("key_id"), str)):
        return "malformed", f"auth block is not {{alg: {ALG}, key_id, mac}}"
    by_id = {key_id(k): k for k in keys}
    k = by_id.get(auth["key_id"])
    if k is None:
        return "unknown_key", f"signed with key {auth['key_id']}, which is not available here"
    try:
        body = canonical(obj)
    except ValueError as e:
        return "malformed", f"not canonical JSON: {e}"
    want = hmac.new(k, body, hashlib.sha256).hexdigest()
    if hmac.compare_digest(want, auth["mac"]):
        return "verified", ""
    return "bad_mac", "HMAC mismatch: the line was edited, or was not written by solbench"
