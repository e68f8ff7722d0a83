"""Parent-side handle on one worker process (spawn, request/reply with timeouts, logs)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from typing import Any


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
    an authenticated AF_UNIX ``multiprocessing.connection``; tensors cross as shared memory
    (torch's ``file_system`` strategy on CPU) or CUDA IPC handles. Not thread-safe; one
    request in flight at a time. stdout/stderr of the worker go to a log file capped by
    RLIMIT_FSIZE."""

    def __init__(self, device: str, log_cap_bytes: int = 16 << 20, start_timeout_s: float = 180):
        import secrets
        import subprocess
        import sys
        import threading
        from multiprocessing.connection import Listener

        import torch.multiprocessing as tmp

        tmp.set_sharing_strategy("file_system")
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
        env.setdefault("PYTHONUNBUFFERED", "1")

        def limits():
            try:
                import resource

                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (log_cap_bytes, log_cap_bytes))
            except Exception:  # noqa: BLE001
                pass
            os.setsid()  # own process group: killing it takes the candidate's children too

        self._logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "solbench.harness.worker", address, device],
            stdin=subprocess.DEVNULL, stdout=self._logf, stderr=subprocess.STDOUT, env=env,
            preexec_fn=limits, close_fds=True,
        )
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
        if status != "ok":
            self.kill()
            raise WorkerDied(self.proc.returncode, f"start: {hello.get('message')}")
        self.flush_default = hello.get("flush_default", 0)

    def _wait(self, seq: int, timeout_s: float, during: str):
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(timeout_s, during)
            try:
                ready = self.conn.poll(min(left, 0.25))
            except (EOFError, OSError):
                ready = False
                self._dead(during)
            if ready:
                try:
                    rseq, status, payload = self.conn.recv()
                except (EOFError, OSError, ConnectionResetError):
                    self._dead(during)
                except Exception as e:  # noqa: BLE001 - garbage on the channel
                    self.kill()
                    raise ProtocolError(f"unreadable reply during {during}: {type(e).__name__}: {e}") from None
                if rseq != seq:
                    self.kill()
                    raise ProtocolError(f"reply #{rseq} to request #{seq} during {during}")
                return status, payload
            if self.proc.poll() is not None:
                # drain a reply that raced the exit
                try:
                    if self.conn.poll(0):
                        continue
                except (EOFError, OSError):
                    pass
                self._dead(during)

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
        try:
            self._logf.close()
        except Exception:  # noqa: BLE001
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
