"""Run manifest: what produced a results file, written beside it (``<results>.manifest.json``).

One entry per run (a process appending to the file): solbench version and git commit, the
command line and config, host, Python/torch/triton/CUDA versions, and each visible GPU's name,
UUID, driver and clocks read through NVML (nvidia-ml-py) when it is present. Entries are
signed like trace lines (:mod:`.auth`), so an edited manifest is detected too. Collection
never fails a run: a part that cannot be read is recorded as ``{"error": ...}``.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = 1


def manifest_path(results: str | Path) -> Path:
    p = Path(results)
    return p.with_name(p.name + ".manifest.json")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> dict[str, Any]:
    """Commit of the solbench source in use (None outside a git checkout) and whether the tree
    has uncommitted changes."""
    src = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return {"commit": None}
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError) as e:
        return {"commit": None, "error": f"{type(e).__name__}: {e}"}


def gpus() -> list[dict[str, Any]] | dict[str, str]:
    """Every GPU NVML sees: index, name, UUID, driver, current/max SM and memory clocks (MHz),
    application clocks, power limit (W). An empty list when NVML has no device; ``{"error"}``
    when NVML is missing or fails."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return {"error": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - no driver on CPU machines
        return {"error": f"NVML unavailable: {type(e).__name__}: {e}"}
    out = []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g: dict[str, Any] = {"index": i, "driver": driver}

            def put(name, fn, *args):
                try:
                    v = fn(h, *args)
                    g[name] = v.decode() if isinstance(v, bytes) else v
                except Exception:  # noqa: BLE001 - a field this GPU or driver lacks
                    g[name] = None

            put("name", pynvml.nvmlDeviceGetName)
            put("uuid", pynvml.nvmlDeviceGetUUID)
            put("sm_clock_mhz", pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM)
            put("mem_clock_mhz", pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_MEM)
            put("max_sm_clock_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_SM)
            put("max_mem_clock_mhz", pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_MEM)
            put("app_sm_clock_mhz", pynvml.nvmlDeviceGetApplicationsClock, pynvml.NVML_CLOCK_SM)
            put("app_mem_clock_mhz", pynvml.nvmlDeviceGetApplicationsClock, pynvml.NVML_CLOCK_MEM)
            put("power_limit_mw", pynvml.nvmlDeviceGetEnforcedPowerLimit)
            out.append(g)
    except Exception as e:  # noqa: BLE001
        return {"error": f"NVML query failed: {type(e).__name__}: {e}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return out


def _seed_fingerprint(value: Any) -> str:
    from ..inputs.seeds import fingerprint

    try:
        if isinstance(value, int):
            return fingerprint(value)
        v = str(value).strip().lower()
        return fingerprint(int(v, 16) if v.startswith("0x") else int(v))
    except ValueError:
        try:
            return fingerprint(int(str(value), 16))
        except ValueError:
            return "redacted"


def redact_seed_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of ``--seed`` replaced by its fingerprint
    (:func:`solbench.inputs.seeds.fingerprint`): the base seed is the run's secret, and the
    manifest is written while the run goes on (docs/inputs.md)."""
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--seed" and i + 1 < len(out):
            out[i + 1] = _seed_fingerprint(out[i + 1])
        elif a.startswith("--seed="):
            out[i] = "--seed=" + _seed_fingerprint(a.split("=", 1)[1])
    return out


def _redact_seed_config(config: dict[str, Any]) -> dict[str, Any]:
    return {k: (_seed_fingerprint(v) if k == "seed" and v is not None else v) for k, v in config.items()}


def collect(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """A fresh manifest entry for this process (``run_id`` a new random UUID)."""
    from .. import __version__

    libs = {k: _version(k) for k in ("torch", "triton", "numpy", "pydantic", "nvidia-ml-py",
                                     "cupti-python")}
    cuda = None
    if "torch" in sys.modules:  # never import torch only to name its CUDA
        cuda = getattr(getattr(sys.modules["torch"], "version", None), "cuda", None)
    return {
        "manifest_schema": MANIFEST_SCHEMA,
        "run_id": uuid.uuid4().hex,
        "started": datetime.now(timezone.utc).isoformat(),
        "solbench": {"version": __version__, **git_commit()},
        "argv": redact_seed_argv(sys.argv),
        "cwd": os.getcwd(),
        "config": _redact_seed_config(config or {}),
        "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                 "machine": platform.machine(), "cpu_count": os.cpu_count(),
                 "python": platform.python_version()},
        "libs": {**libs, "cuda": cuda},
        "gpus": gpus(),
    }


def read_manifest(results: str | Path) -> dict[str, Any] | None:
    """The manifest of a results file as stored (``{"schema", "runs": [...]}``), or None
    when there is none. A manifest that is not JSON reads as ``{"error": ...}``."""
    p = manifest_path(results)
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return {"error": f"{p}: unreadable manifest: {e}", "runs": []}
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        return {"error": f"{p}: not a solbench manifest", "runs": []}
    return data


def add_run(results: str | Path, entry: dict[str, Any]) -> Path:
    """Add a signed run entry to the manifest beside ``results`` (atomic replace)."""
    p = manifest_path(results)
    data = read_manifest(results)
    if data is None or "error" in data:
        data = {"manifest_schema": MANIFEST_SCHEMA, "results": Path(results).name, "runs": []}
    data["runs"].append(entry)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, p)
    return p
