"""The profiling pipeline: aggregation maths by hand, and the real pipeline on CPU (tiny)."""

from __future__ import annotations

import json
import statistics

import pytest

from solbench.profile.classify import Classification
from solbench.profile.pipeline import _Rec, phase_and_tags, summarize, union_length

GEMM = Classification("gemm", "", "name:gemm")
ELT = Classification("framework_native", "elementwise", "name:aten")
EMB = Classification("framework_native", "embedding", "name:aten")
AUX = Classification("vendor_other", "", "name:vendor")


def test_union_length():
    assert union_length([]) == 0
    assert union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_length([(0, 10), (2, 3), (4, 5)]) == 10
    assert union_length([(3, 4), (0, 1)]) == 2


def _recs():
    # two profiled steps (us); C overlaps B by 30 us
    return [
        _Rec("A", ["aten::mm"], [], 0, 100, [], GEMM),
        _Rec("B", ["aten::add"], [], 100, 50, [], ELT),
        _Rec("C", ["aten::embedding_bag"], [], 120, 30, [], EMB),
        _Rec("D", ["aten::cudnn_batch_norm"], [], 200, 20, [], AUX),
        _Rec("A", ["aten::mm"], [], 1000, 100, [], GEMM),
    ]


def test_summarize_by_hand():
    recs = _recs()
    busy = union_length((r.start, r.start + r.dur) for r in recs)
    assert busy == 270  # 100 + 50 + 20 + 100
    s = summarize(recs, busy, active_steps=2, wall_ms=0.2)
    # per step: kernel sum 0.150 ms, busy 0.135 ms -> overlap scale 0.9
    assert s["kernel_sum_ms"] == pytest.approx(0.150)
    assert s["busy_ms"] == pytest.approx(0.135)
    c = s["classes"]
    assert c["gemm"].ms == pytest.approx(0.090)
    assert c["framework_native"].ms == pytest.approx(0.036)
    assert c["vendor_other"].ms == pytest.approx(0.009)
    assert sum(v.ms for v in c.values()) == pytest.approx(s["busy_ms"])
    af = s["addressable_fraction"]
    assert af.strict_busy == pytest.approx(0.036 / 0.135)
    assert af.strict_wall == pytest.approx(0.18)
    assert af.loose_busy == pytest.approx(0.045 / 0.135)
    assert af.loose_wall == pytest.approx(0.225)
    assert s["busy_over_wall"] == pytest.approx(0.675) and s["launch_bound"]
    assert s["subclasses"]["elementwise"].ms == pytest.approx(0.0225)
    assert s["subclasses"]["embedding"].ms == pytest.approx(0.0135)
    # kernel groups: A twice -> one group with 1 launch per step
    a = [g for g in s["kernel_table"] if g.kernel == "A"][0]
    assert a.count == 1.0 and a.ms == pytest.approx(0.090)
    assert [g.kernel for g in s["top_kernels"]] == ["B", "C", "D"]  # addressable (loose) only, by time


def test_summarize_wall_below_busy_uses_busy():
    s = summarize(_recs(), 270, active_steps=2, wall_ms=0.1)
    af = s["addressable_fraction"]
    assert af.strict_wall == pytest.approx(af.strict_busy)
    assert not s["launch_bound"]


def test_phase_and_tags():
    ctx = ["aten::mm", "autograd::engine::evaluate_function: MmBackward0", "solbench_step_0"]
    assert phase_and_tags(ctx) == ("backward", ("MmBackward0",))
    assert phase_and_tags(["aten::add_", "solbench::sparse_optimizer", "Optimizer.step#SGD.step"]) == (
        "optimizer", ("solbench::sparse_optimizer",))
    assert phase_and_tags(["aten::bmm", "solbench::dot_interaction"]) == ("forward", ("solbench::dot_interaction",))


@pytest.fixture(scope="module")
def dlrm_train():
    from solbench.profile.pipeline import profile

    return profile("dlrm-kaggle", "train", "tiny", "cpu", wall_steps=20, active_steps=1, warmup=1, threads=1)


def test_real_cpu_profile_dlrm_train(dlrm_train):
    r = dlrm_train
    assert r.classified_by == "aten op" and r.device == "cpu"
    assert len(r.wall_samples_ms) == 20 and r.wall_ms == statistics.median(r.wall_samples_ms)
    total = sum(c.ms for c in r.classes.values())
    assert total == pytest.approx(r.busy_ms, rel=1e-6)
    assert sum(s.ms for s in r.subclasses.values()) == pytest.approx(r.classes["framework_native"].ms, rel=1e-6)
    af = r.addressable_fraction
    for v in (af.strict_busy, af.strict_wall, af.loose_busy, af.loose_wall):
        assert 0.0 <= v <= 1.0
    assert af.strict_busy <= af.loose_busy and af.strict_wall <= af.strict_busy + 1e-12
    assert sum(g.ms for g in r.kernel_table) == pytest.approx(total, rel=1e-6)
    # what a DLRM step contains: embedding bags (native), MLP GEMMs, the three phases, our annotations
    assert r.subclasses["embedding"].ms > 0 and r.classes["gemm"].ms > 0
    phases = {g.phase for g in r.kernel_table}
    assert phases == {"forward", "backward", "optimizer"}
    tags = {t for g in r.kernel_table for t in g.tags}
    assert {"solbench::embedding_tables", "solbench::dot_interaction", "solbench::sparse_optimizer",
            "solbench::linear_relu_k13", "solbench::linear_relu_k367"} <= tags
    assert all(k.cls in ("framework_native", "vendor_other") for k in r.top_kernels)
    assert r.classes["unknown"].ms == 0.0 and not any("unknown" in w for w in r.warnings)
    json.loads(r.to_json())


def test_projection_on_real_cpu_profile(dlrm_train):
    """The DLRM-Bench map finds the embedding-bag forward of a real (CPU) DLRM profile; its share
    equals the sum over the kernel groups picked by an independent filter."""
    from solbench.profile.amdahl import project

    prof = dlrm_train.model_dump(mode="json")
    fwd_ops = {"aten::_embedding_bag", "aten::embedding_bag", "aten::_embedding_bag_forward_only"}
    expect = sum(g["share_wall"] for g in prof["kernel_table"]
                 if g["phase"] == "forward" and fwd_ops & set(g["ops"]))
    assert expect > 0
    tr = {"definition": "dlrm01_embedding_bag_sum_fp32", "solution": "s",
          "workload": {"uuid": "w", "axes": {}, "inputs": {}},
          "evaluation": {"status": "PASSED", "environment": {"hardware": "cpu"}, "correctness": {},
                         "performance": {"latency_ms": 1.0, "reference_latency_ms": 2.0, "speedup_factor": 2.0}}}
    res = project(prof, [tr])
    assert res["problems"][0]["share_wall"] == pytest.approx(expect)
    assert res["amdahl_mapped"]["time_saved"] == pytest.approx(expect * 0.5)


def test_cli_profile_json_and_outputs(tmp_path):
    from typer.testing import CliRunner

    from solbench.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["profile", "--list", "--json"])
    assert res.exit_code == 0
    names = [w["name"] for w in json.loads(res.stdout)["workloads"]]
    assert "dlrm-kaggle" in names and "llama-8b" in names
    res = runner.invoke(app, ["profile", "dcnv2", "--device", "cpu", "--scale", "tiny", "--json", "--active", "1",
                              "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for k in ("workload", "wall_ms", "busy_ms", "launch_bound", "addressable_fraction", "classes", "top_kernels"):
        assert k in out
    assert set(out["addressable_fraction"]) == {"strict_busy", "strict_wall", "loose_busy", "loose_wall"}
    assert (tmp_path / "profile_dcnv2_infer_tiny.json").is_file()
    assert (tmp_path / "profile_dcnv2_infer_tiny_classes.png").stat().st_size > 1000
    res = runner.invoke(app, ["profile", "nope", "--device", "cpu"])
    assert res.exit_code == 2 and "unknown workload" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["profile", "dcnv2", "--device", "cpu", "--steps", "5"])
    assert res.exit_code == 2 and ">= 20" in res.output


def test_cuda_records_link_kernels_to_ops():
    """The CUDA path on stand-in profiler objects: a kernel's linked correlation id names its
    launching CPU op; ancestors give the op chain, phase and tags; user annotations are
    dropped; the busy union merges overlapping kernels."""
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType

    from solbench.profile.pipeline import _cuda_records

    step = NS(id=1, name="solbench_step_0", device_type=DeviceType.CPU, cpu_parent=None, input_shapes=[])
    node = NS(id=2, name="autograd::engine::evaluate_function: MmBackward0", device_type=DeviceType.CPU,
              cpu_parent=step, input_shapes=[])
    mm = NS(id=3, name="aten::mm", device_type=DeviceType.CPU, cpu_parent=node, input_shapes=[[64, 32], [32, 16]])
    lin = NS(id=4, name="aten::linear", device_type=DeviceType.CPU, cpu_parent=step, input_shapes=[])
    addmm = NS(id=5, name="aten::addmm", device_type=DeviceType.CPU, cpu_parent=lin, input_shapes=[[16], [8, 32], [32, 16]])

    def kev(name, start_us, dur_us, link, annot=False, dev=DeviceType.CUDA):
        return NS(name=lambda: name, device_type=lambda: dev, is_user_annotation=lambda: annot,
                  start_ns=lambda: int(start_us * 1000), duration_ns=lambda: int(dur_us * 1000),
                  linked_correlation_id=lambda: link)

    kin = [kev("nvjet_sm90_tst_128x128", 0, 10, 5), kev("nvjet_sm90_tst_64x64", 5, 10, 3),
           kev("solbench_step_0", 0, 100, 0, annot=True), kev("aten::mm", 0, 1, 0, dev=DeviceType.CPU),
           kev("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 40, 5, 99)]
    prof = NS(events=lambda: [step, node, mm, lin, addmm],
              profiler=NS(kineto_results=NS(events=lambda: kin)))
    recs, busy = _cuda_records(prof)
    assert busy == pytest.approx(20.0)  # [0, 15) and [40, 45)
    assert [r.kernel[:14] for r in recs] == ["nvjet_sm90_tst", "nvjet_sm90_tst", "void at::nativ"]
    a, b, c = recs
    assert a.ops == ["aten::addmm", "aten::linear"] and a.phase == "forward" and a.shapes == [[16], [8, 32], [32, 16]]
    assert b.ops == ["aten::mm"] and b.phase == "backward" and b.tags == ("MmBackward0",)
    assert a.cls == b.cls == "gemm"
    assert c.ops == [] and c.cls == "framework_native"  # unlinked ATen kernel still classified by name
