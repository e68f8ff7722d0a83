"""Parent-side handle on one worker process (spawn, request/reply with timeouts, logs)."""

from __future__ import annotations

import json
import os
import queue
import signal
import tempfile
import threading
import time
from typing import Any

#: largest reply the parent accepts from a worker (bytes of JSON)
MAX_REPLY_BYTES = 16 << 20


#: pids of workers alive in this process (anything else the parent adopts is a stray)
LIVE_WORKERS: set[int] = set()
_PRE_EXISTING: set[int] | None = None
#: held while a worker is spawned and registered, and while strays are listed, so a worker
#: started on another thread (the reference worker, started beside the candidate's) is never
#: seen between its fork and its registration
_SPAWN_LOCK = threading.RLock()


def become_subreaper() -> None:
    """Make this process the Linux child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a
    candidate's double-forked, setsid'd daemon is re-parented here instead of to init, where
    :func:`stray_children` can see and kill it. No-op where prctl is unavailable."""
    global _PRE_EXISTING
    if _PRE_EXISTING is not None:
        return
    from .guards import child_pids

    _PRE_EXISTING = child_pids(os.getpid())
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001
        pass


def stray_children() -> list[dict[str, Any]]:
    """Children of this process that are neither workers, nor runtime helpers, nor older than
    the first worker: processes a candidate left behind (re-parented to us)."""
    from .guards import _allowed, cmdline, exe_name

    out = []
    for c in unregistered_children():
        cmd = cmdline(c)
        if cmd and not _allowed(cmd, exe_name(c) or "?"):
            out.append({"pid": c, "cmdline": cmd[:200]})
    return out


def unregistered_children() -> list[int]:
    """Every child of this process that is not a live worker and was not there before the
    first worker: whatever a candidate left re-parented here, runtime helper or not."""
    from .guards import child_pids, proc_state, running_tasks

    with _SPAWN_LOCK:
        kids = sorted(child_pids(os.getpid()) - LIVE_WORKERS - (_PRE_EXISTING or set()))
    out = []
    for pid in kids:
        if proc_state(pid) == "Z" and not running_tasks(pid):
            try:  # a finished orphan re-parented here: reap it (this process is the subreaper)
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass
            continue
        out.append(pid)
    return out


def kill_strays() -> list[dict[str, Any]]:
    strays = stray_children()
    for s in strays:
        try:
            os.kill(s["pid"], signal.SIGKILL)
            os.waitpid(s["pid"], os.WNOHANG)
        except OSError:
            pass
    return strays


class WorkerDied(Exception):
    """The worker exited (crash, os._exit, signal). ``exitcode`` as multiprocessing reports
    it (negative = signal number)."""

    def __init__(self, exitcode: int | None, during: str):
        self.exitcode = exitcode
        self.during = during
        sig = ""
        if exitcode is not None and exitcode < 0:
            try:
                sig = f" ({signal.Signals(-exitcode).name})"
            except ValueError:
                pass
        super().__init__(f"worker exited with code {exitcode}{sig} during {during}")


class WorkerTimeout(Exception):
    """The worker did not answer within the time limit (it is killed)."""

    def __init__(self, seconds: float, during: str):
        self.seconds = seconds
        self.during = during
        super().__init__(f"no answer within {seconds:.0f} s during {during}")


class ProtocolError(Exception):
    """A reply did not match its request (sequence number), or came unasked."""


class WorkerHandle:
    """One worker process (a fresh ``python -m solbench.harness.worker``), connected through
    an authenticated AF_UNIX ``multiprocessing.connection``.

    Trust boundary: requests go parent -> worker pickled (the worker may unpickle what the
    parent sends); replies come back as length-prefixed **JSON only**, at most
    :data:`MAX_REPLY_BYTES`, read by a reader thread so a stalled or garbage reply can never
    block or execute code in the parent. Tensors are never sent back: the parent owns every
    buffer (files in /dev/shm on CPU, CUDA IPC on GPU). stdout/stderr of the worker are drained
    by a parent thread into a log file that keeps at most ``log_cap_bytes``.
    Not thread-safe; one request in flight at a time."""

    def __init__(self, device: str, log_cap_bytes: int = 16 << 20, start_timeout_s: float = 180):
        import secrets
        import subprocess
        import sys
        import threading
        from multiprocessing.connection import Listener

        self.device = device
        fd, self.log_path = tempfile.mkstemp(prefix="solbench-worker-", suffix=".log")
        os.close(fd)
        self._log_offset = 0
        key = secrets.token_bytes(32)
        sockdir = tempfile.mkdtemp(prefix="solbench-")
        address = os.path.join(sockdir, "w.sock")
        listener = Listener(address, family="AF_UNIX", authkey=key)
        env = dict(os.environ)
        env["SOLBENCH_WORKER_AUTHKEY"] = key.hex()
        # the worker imports the same solbench as this process (an installed copy elsewhere
        # must never stand in for it)
        import solbench

        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(solbench.__file__)))
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")

        become_subreaper()
        self._logf = open(self.log_path, "ab")
        self.log_dropped = 0
        with _SPAWN_LOCK:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "solbench.harness.worker", address, device],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, close_fds=True,  # own process group: kill takes its children
            )
            LIVE_WORKERS.add(self.proc.pid)
        self._drain = threading.Thread(target=self._drain_logs, args=(log_cap_bytes,), daemon=True)
        self._drain.start()
        box: dict = {}

        def accept():
            try:
                box["conn"] = listener.accept()
            except Exception as e:  # noqa: BLE001
                box["err"] = e

        th = threading.Thread(target=accept, daemon=True)
        th.start()
        deadline = time.monotonic() + start_timeout_s
        while th.is_alive() and time.monotonic() < deadline and self.proc.poll() is None:
            th.join(0.1)
        if "conn" not in box:
            self.alive = False
            try:
                listener.close()
            except Exception:  # noqa: BLE001
                pass
            self.kill()
            if self.proc.poll() is not None:
                raise WorkerDied(self.proc.returncode, "start")
            raise WorkerTimeout(start_timeout_s, "start")
        listener.close()
        try:
            os.unlink(address)
            os.rmdir(sockdir)
        except OSError:
            pass
        self.conn = box["conn"]
        self.seq = 0
        self.alive = True
        self.pid = self.proc.pid
        status, hello = self._wait(0, start_timeout_s, "start")
        self._replies: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()
        if status != "ok":
            self.kill()
            raise WorkerDied(self.proc.returncode, f"start: {hello.get('message')}")
        self.flush_default = hello.get("flush_default", 0)

    def _drain_logs(self, cap: int) -> None:
        """Copy the worker's output to the log file until ``cap`` bytes, then count the rest."""
        written = 0
        out = self.proc.stdout
        while True:
            try:
                chunk = out.read1(65536) if hasattr(out, "read1") else out.read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if written < cap:
                part = chunk[: cap - written]
                try:
                    self._logf.write(part)
                    self._logf.flush()
                except (OSError, ValueError):
                    return
                written += len(part)
                self.log_dropped += len(chunk) - len(part)
            else:
                self.log_dropped += len(chunk)

    def _read_replies(self) -> None:
        """Reader thread: JSON replies only, size-capped; anything else ends the channel."""
        while True:
            try:
                raw = self.conn.recv_bytes(MAX_REPLY_BYTES)
            except (EOFError, OSError) as e:
                self._replies.put(("eof", str(e)))
                return
            try:
                msg = json.loads(raw.decode("utf-8"))
                if not (isinstance(msg, list) and len(msg) == 3 and isinstance(msg[0], int)
                        and isinstance(msg[1], str) and isinstance(msg[2], dict)):
                    raise ValueError("not a [seq, status, payload] reply")
            except (ValueError, UnicodeDecodeError) as e:
                self._replies.put(("garbage", f"{type(e).__name__}: {e}"))
                return
            self._replies.put(("msg", msg))

    def _wait(self, seq: int, timeout_s: float, during: str):
        if not hasattr(self, "_replies"):
            # before the reader exists (hello): read one reply directly, JSON only
            if not self.conn.poll(timeout_s):
                self.kill()
                raise WorkerTimeout(timeout_s, during)
            try:
                msg = json.loads(self.conn.recv_bytes(MAX_REPLY_BYTES).decode("utf-8"))
                return msg[1], msg[2]
            except Exception as e:  # noqa: BLE001
                self.kill()
                raise ProtocolError(f"unreadable hello: {type(e).__name__}: {e}") from None
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(timeout_s, during)
            try:
                kind, item = self._replies.get(timeout=min(left, 0.25))
            except queue.Empty:
                if self.proc.poll() is not None and self._replies.empty():
                    time.sleep(0.05)
                    if self._replies.empty():
                        self._dead(during)
                continue
            if kind == "eof":
                self._dead(during)
            if kind == "garbage":
                self.kill()
                raise ProtocolError(f"unreadable reply during {during}: {item}")
            rseq, status, payload = item
            if rseq != seq:
                self.kill()
                raise ProtocolError(f"reply #{rseq} to request #{seq} during {during}")
            return status, payload

    def _dead(self, during: str):
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        self.alive = False
        raise WorkerDied(self.proc.returncode, during)

    def request(self, op: str, payload: dict | None = None, timeout_s: float = 120) -> tuple[str, dict]:
        """Send one request and wait for its reply. Raises WorkerDied / WorkerTimeout /
        ProtocolError; the worker is unusable after any of them."""
        if not self.alive:
            raise WorkerDied(self.proc.returncode, op)
        self.seq += 1
        try:
            self.conn.send((self.seq, op, payload or {}))
        except (BrokenPipeError, OSError):
            self._dead(op)
        return self._wait(self.seq, timeout_s, op)

    def log_since_last(self, cap: int = 8192) -> str:
        """New log text since the previous call, keeping the last ``cap`` characters."""
        if self.proc.poll() is not None:  # exited: let the drain thread copy its last output
            self._drain.join(timeout=2)
        try:
            size = os.path.getsize(self.log_path)
            with open(self.log_path, "rb") as f:
                start = max(self._log_offset, size - cap)
                f.seek(start)
                data = f.read(size - start)
            skipped = start - self._log_offset
            self._log_offset = size
        except OSError:
            return ""
        text = data.decode(errors="replace")
        if self.log_dropped:
            text += f"\n[... {self.log_dropped} more bytes of output dropped (log cap) ...]"
            self.log_dropped = 0
        if skipped > 0:
            text = f"[... {skipped} bytes of log cut ...]\n" + text
        return text

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (the candidate's forks included)."""
        self.alive = False
        try:
            from .guards import descendants

            kids = descendants(self.proc.pid)
        except Exception:  # noqa: BLE001
            kids = set()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for c in kids:
            try:
                os.kill(c, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass
        LIVE_WORKERS.discard(self.proc.pid)
        kill_strays()
        try:
            self._logf.close()
        except Exception:  # noqa: BLE001
            pass

    def pause(self) -> None:
        """SIGSTOP the worker's process group (no thread of it runs until :meth:`resume`)."""
        try:
            os.killpg(self.proc.pid, signal.SIGSTOP)
        except OSError:
            pass

    def resume(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)
        except OSError:
            pass

    def close(self) -> None:
        if self.alive:
            try:
                self.request("exit", timeout_s=10)
            except Exception:  # noqa: BLE001
                pass
        self.kill()
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            os.unlink(self.log_path)
        except OSError:
            pass
