"""Executor plumbing that needs no Ray: which GPU a worker reports, the one-GPU assertion, the
executor choice on the command line."""

import sys
import types

import pytest
import torch
from typer.testing import CliRunner

from solbench.run import executors as X


def test_visible_devices_parses_cuda_visible_devices():
    assert X.visible_devices({}) is None
    assert X.visible_devices({"CUDA_VISIBLE_DEVICES": "3"}) == ["3"]
    assert X.visible_devices({"CUDA_VISIBLE_DEVICES": "0, 1"}) == ["0", "1"]
    assert X.visible_devices({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert X.visible_devices({"CUDA_VISIBLE_DEVICES": "GPU-ab12"}) == ["GPU-ab12"]


class _FakeNvml(types.ModuleType):
    """pynvml with two GPUs: index 0 -> GPU-aaaa, index 1 -> GPU-bbbb."""

    UUIDS = ["GPU-aaaa", "GPU-bbbb"]

    def __init__(self):
        super().__init__("pynvml")
        self.nvmlInit = lambda: None
        self.nvmlShutdown = lambda: None
        self.nvmlDeviceGetCount = lambda: 2
        self.nvmlDeviceGetHandleByIndex = lambda i: ("h", self.UUIDS[i])
        self.nvmlDeviceGetUUID = lambda h: h[1].encode()  # older bindings return bytes

        def by_uuid(u):
            if u not in self.UUIDS:
                raise RuntimeError("NVML_ERROR_NOT_FOUND")
            return ("h", u)

        self.nvmlDeviceGetHandleByUUID = by_uuid


def test_nvml_uuid_by_index_uuid_and_cuda_order(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    # Ray gives the worker one index: NVML's device at that index
    assert X.nvml_uuid(["1"]) == "GPU-bbbb"
    assert X.nvml_uuid(["GPU-aaaa"]) == "GPU-aaaa"
    # CUDA's own UUID of device 0 decides (CUDA's order may differ from NVML's)
    assert X.nvml_uuid(["1"], torch_uuid="aaaa") == "GPU-aaaa"
    # several visible devices and no CUDA UUID: which one is unknown, so none is recorded
    assert X.nvml_uuid(["0", "1"]) is None
    assert X.nvml_uuid(None) is None  # two GPUs, none chosen
    assert X.nvml_uuid(["1"], torch_uuid="cccc") is None  # NVML does not know it: not a guess


def test_device_identity_cpu_has_no_gpu():
    ident = X.device_identity("cpu", exclusive=True)
    assert ident["gpu_uuid"] is None and ident["pid"] > 0 and ident["node"]


def test_gpu_worker_must_see_exactly_one_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(RuntimeError, match="exactly one GPU.*'0,1'.*device_count\\(\\)=2"):
        X.device_identity("cuda", exclusive=True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="CUDA_VISIBLE_DEVICES=None"):
        X.device_identity("cuda", exclusive=True)


def test_make_executor_choices():
    assert X.make_executor("local").name == "local"
    assert X.make_executor("ray", address="auto", workers=2).name == "ray"
    with pytest.raises(ValueError, match="'dask': expected one of local, ray"):
        X.make_executor("dask")
    with pytest.raises(ValueError, match="need --executor ray"):
        X.make_executor("local", address="10.0.0.1:6379")


def test_run_rejects_unknown_executor_in_one_line(tmp_path):
    from solbench.cli import app

    r = CliRunner().invoke(app, ["run", "l1", "--solutions", str(tmp_path), "-o",
                                 str(tmp_path / "r.jsonl"), "--executor", "dask"])
    assert r.exit_code == 2
    assert "--executor: executor 'dask': expected one of local, ray" in r.output


def test_telemetry_reads_the_gpu_cuda_uses_not_nvml_index(monkeypatch):
    """Under CUDA_VISIBLE_DEVICES=1 CUDA's device 0 is NVML's device 1: telemetry (clocks,
    throttling) must be read from that GPU, found by the UUID CUDA reports."""
    from solbench.harness.telemetry import Telemetry

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    props = types.SimpleNamespace(uuid="bbbb")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    t = Telemetry(0)
    assert t.ok and t._h == ("h", "GPU-bbbb")
    props.uuid = "cccc"  # a GPU NVML does not know: no telemetry rather than another GPU's
    assert not Telemetry(0).ok
