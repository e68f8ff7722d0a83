"""Who evaluates: host, pid and the NVML UUID of the one GPU a worker uses."""

from __future__ import annotations

import os
import socket
from typing import Any


def visible_devices(env: dict[str, str] | None = None) -> list[str] | None:
    """Entries of CUDA_VISIBLE_DEVICES (indices or ``GPU-``/``MIG-`` UUIDs); None when unset."""
    v = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return None
    return [x.strip() for x in v.split(",") if x.strip()]


def nvml_uuid(visible: list[str] | None, torch_uuid: str | None = None) -> str | None:
    """NVML UUID (``GPU-xxxxxxxx-...``) of the one GPU this process uses.

    ``torch_uuid``: the UUID CUDA reports for device 0 (``torch.cuda.get_device_properties(0).uuid``);
    it decides when given, because CUDA's device order need not be NVML's (PCI bus) order, and
    NVML is asked to confirm it. Otherwise the single CUDA_VISIBLE_DEVICES entry (an index in
    NVML order, or a UUID) is looked up. Returns None when NVML is unavailable.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: no UUID
        return None
    try:
        def _s(x):
            return x.decode() if isinstance(x, bytes) else str(x)

        if torch_uuid:
            want = torch_uuid if torch_uuid.startswith(("GPU-", "MIG-")) else f"GPU-{torch_uuid}"
            h = pynvml.nvmlDeviceGetHandleByUUID(want)
            return _s(pynvml.nvmlDeviceGetUUID(h))
        if visible and len(visible) == 1:
            e = visible[0]
            h = (pynvml.nvmlDeviceGetHandleByUUID(e) if e.startswith(("GPU-", "MIG-"))
                 else pynvml.nvmlDeviceGetHandleByIndex(int(e)))
            return _s(pynvml.nvmlDeviceGetUUID(h))
        if visible is None and pynvml.nvmlDeviceGetCount() == 1:
            return _s(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)))
        return None
    except Exception:  # noqa: BLE001 - an unknown UUID or index: record none rather than a wrong one
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _torch_uuid(index: int = 0) -> str | None:
    import torch

    try:
        u = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    except Exception:  # noqa: BLE001
        return None
    return str(u) if u is not None else None


def device_identity(device: str, *, exclusive: bool = False) -> dict[str, Any]:
    """Who evaluates: host, pid and, on CUDA, the NVML UUID of the GPU ``device`` names.

    ``exclusive``: assert the process sees exactly one GPU (a Ray GPU worker: Ray sets
    CUDA_VISIBLE_DEVICES to the one GPU it assigned). Raises RuntimeError, naming what was seen,
    when it sees none or several.
    """
    import torch

    ident: dict[str, Any] = {"node": socket.gethostname(), "pid": os.getpid(), "gpu_uuid": None}
    if torch.device(device).type != "cuda":
        return ident
    vis = visible_devices()
    if exclusive:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if vis is None or len(vis) != 1 or n != 1:
            raise RuntimeError(
                f"a GPU worker must see exactly one GPU: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                f"torch.cuda.device_count()={n}")
    idx = torch.device(device).index or 0
    ident["gpu_uuid"] = nvml_uuid(vis if idx == 0 else None, _torch_uuid(idx))
    ident["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return ident
