"""Kernel-language plug-ins: registry, spec rules, requirements with one-line reasons, the
C++ build path (bad source, cache hit, timeout), the allow-list and audit hooks."""

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from solbench import languages
from solbench.harness import build, guards
from solbench.harness.build import BuildError, BuildTimeout, first_error_line, run_build
from solbench.languages import base
from solbench.integrity.static_audit import audit_sources
from solbench.spec import Solution

SHARED = Path(os.environ.get("SOLBENCH_SHARED_DIR")
              or Path(__file__).resolve().parents[2].parent / "shared")
EXAMPLES = SHARED / "datasets" / "upstream-examples"

#: upstream SOL-ExecBench's SupportedLanguages (core/data/solution.py), by family
UPSTREAM_PYTHON = {"pytorch", "triton", "tlx", "cute_dsl", "cutile", "cudnn_frontend"}
UPSTREAM_CPP = {"cutlass", "cudnn", "cublas", "cuda_cpp"}


def _sol(langs, entry, sources, **spec):
    return Solution.model_validate({
        "name": "s", "definition": "d",
        "spec": {"languages": langs, "entry_point": entry, **spec},
        "sources": [{"path": p, "content": c} for p, c in sources.items()]})


# -- registry and spec -----------------------------------------------------------------


def test_every_upstream_language_has_a_plugin_of_its_family():
    for name in UPSTREAM_PYTHON:
        assert languages.get(name).family == "python", name
    for name in UPSTREAM_CPP:
        assert languages.get(name).family == "cpp", name
    # the toolchains each name their solbench extra
    extras = {n: languages.get(n).extra for n in ("cutlass", "cute_dsl", "cudnn_frontend",
                                                  "tvm_ffi", "cutile")}
    assert extras == {"cutlass": "cutlass", "cute_dsl": "cute-dsl", "cudnn_frontend": "cudnn",
                      "tvm_ffi": "tvm-ffi", "cutile": "cutile"}


def test_every_extra_is_declared_in_pyproject():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dists = {"cutlass": "nvidia-cutlass", "cute-dsl": "nvidia-cutlass-dsl",
             "cudnn": "nvidia-cudnn-frontend", "tvm-ffi": "apache-tvm-ffi", "cutile": "cuda-tile"}
    for lang in languages.LANGUAGES.values():
        for r in lang.requirements:
            if r.extra:
                assert any(d.startswith(dists[r.extra]) for d in extras[r.extra]), r.extra


def test_spec_rules_come_from_the_plugins():
    with pytest.raises(ValueError, match="unknown languages .*'fortran'"):
        _sol(["fortran"], "k.py::run", {"k.py": ""})
    with pytest.raises(ValueError, match="cannot be mixed"):
        _sol(["triton", "cuda_cpp"], "k.py::run", {"k.py": ""})
    with pytest.raises(ValueError, match="spec.entry_point: cute_dsl needs a .py entry file"):
        _sol(["cute_dsl"], "k.cu::run", {"k.cu": ""})
    with pytest.raises(ValueError, match="spec.entry_point: cutlass needs a C/C.. *"):
        _sol(["cutlass"], "k.py::run", {"k.py": ""})
    s = _sol(["CUDA_CPP", "cublas"], "k.cu::run", {"k.cu": ""})
    assert s.spec.languages == ["cuda_cpp", "cublas"] and s.spec.is_cpp
    assert s.spec.language.name == "cublas"  # the specific library decides link flags
    assert _sol(["python"], "k.py::run", {"k.py": ""}).spec.language.name == "pytorch"
    assert _sol(["pytorch", "cute_dsl"], "k.py::run", {"k.py": ""}).spec.language.name == "cute_dsl"


def _examples():
    if not EXAMPLES.is_dir():
        return []
    return sorted(EXAMPLES.glob("*/*/solution_*.json"))


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"upstream examples not found at {EXAMPLES}")
@pytest.mark.parametrize("path", _examples(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_upstream_example_loads_and_resolves_to_its_plugin(path):
    from solbench.spec import load_problem

    problem = load_problem(path.parent)
    sol = Solution.model_validate(json.loads(path.read_text()))
    assert sol.definition == problem.definition.name
    lang = languages.get(path.parent.parent.name)  # examples/<language>/<name>/
    assert sol.spec.language is lang
    assert sol.spec.entry_file in {s.path for s in sol.sources}


# -- requirements: one line naming what to install or why it cannot run ------------------


def test_missing_extra_names_the_pip_command(monkeypatch):
    real = base.importlib.util.find_spec

    def no_dsl(name, *a):  # the CuTe DSL wheel is not installed
        return None if name.split(".")[0] == "cutlass" else real(name, *a)

    monkeypatch.setattr(base.importlib.util, "find_spec", no_dsl)
    sol = _sol(["cute_dsl"], "k.py::run", {"k.py": "import cutlass\ndef run(x):\n    return x\n"})
    with pytest.raises(BuildError) as e:
        build.check_requirements(sol, "cuda:0")
    msg = str(e.value)
    assert msg == "cute_dsl: CuTe DSL not found (import cutlass): pip install 'solbench[cute-dsl]'"
    assert "\n" not in msg


@pytest.mark.parametrize("src,imports", [
    ("import torch, triton, triton.language as tl\n", True),  # upstream's nemotron_rms_norm
    ("import triton.language as tl\n", True),
    ("from triton import jit\n", True),
    ("x = 1  # triton, in a comment\n", False),
    ("import tritonx\n", False),
    ("from .triton import k\n", False),
    ("def f(:\n    import os, triton\n", True),  # does not parse: read line by line
])
def test_imports_module_reads_every_import_form(src, imports):
    assert base.imports_module(src, "triton") is imports


def test_triton_example_without_triton_names_it_in_one_line(monkeypatch):
    """Upstream's triton/nemotron_rms_norm (``import torch, triton, ...``) where triton is
    absent: the requirement line, not the import's traceback."""
    real = base.importlib.util.find_spec
    monkeypatch.setattr(base.importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] == "triton" else real(name, *a))
    src = (EXAMPLES / "triton" / "nemotron_rms_norm" / "kernel.py")
    if not src.exists():
        pytest.skip(f"{src} not here")
    sol = _sol(["triton"], "kernel.py::run", {"kernel.py": src.read_text()})
    with pytest.raises(BuildError) as e:
        build.check_requirements(sol, "cuda:0")
    assert str(e.value) == "triton: Triton not found (import triton): pip install triton"


def test_cute_dsl_with_tvm_ffi_needs_the_tvm_ffi_extra(monkeypatch):
    monkeypatch.setattr(base.Requirement, "missing",
                        lambda self: f"{self.what} missing" if self.module == "tvm_ffi" else None)
    src = 'import cutlass\ndef run(x):\n    c = cute.compile(f, x, options="--enable-tvm-ffi")\n'
    with pytest.raises(BuildError, match=r"^cute_dsl: TVM-FFI \(for --enable-tvm-ffi\) missing$"):
        build.check_requirements(_sol(["cute_dsl"], "k.py::run", {"k.py": src}), "cuda:0")
    build.check_requirements(_sol(["cute_dsl"], "k.py::run", {"k.py": "import cutlass\n"}), "cuda:0")


def test_cutlass_headers_from_cutlass_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(base, "package_dir", lambda m: None)
    from solbench.languages import cutlass as cutlass_plugin

    monkeypatch.setattr(cutlass_plugin, "package_dir", lambda m: None)
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    lang = languages.get("cutlass")
    assert lang.requirements[0].missing() == (
        "CUTLASS C++ headers (cutlass/cutlass.h) not found: pip install 'solbench[cutlass]'")
    (tmp_path / "include" / "cutlass").mkdir(parents=True)
    (tmp_path / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    (tmp_path / "tools" / "util" / "include").mkdir(parents=True)
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path))
    assert lang.requirements[0].missing() is None
    assert lang.extra_include_dirs() == [str(tmp_path / "include"),
                                         str(tmp_path / "tools" / "util" / "include")]


def test_cutlass_headers_from_the_nvidia_cutlass_wheel_layout(monkeypatch, tmp_path):
    from solbench.languages import cutlass as cutlass_plugin

    inc = tmp_path / "cutlass_library" / "source" / "include" / "cutlass"
    inc.mkdir(parents=True)
    (inc / "cutlass.h").write_text("")
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.setattr(cutlass_plugin, "package_dir",
                        lambda m: tmp_path / "cutlass_library" if m == "cutlass_library" else None)
    assert cutlass_plugin.cutlass_root() == tmp_path / "cutlass_library" / "source"


def test_cutile_on_hopper_is_unsupported_in_one_line(monkeypatch):
    sol = _sol(["cutile"], "k.py::run", {"k.py": "import cuda.tile as ct\n"})
    monkeypatch.setattr(base, "gpu_identity", lambda d: ("NVIDIA H200", 90))
    with pytest.raises(BuildError) as e:
        build.check_requirements(sol, "cuda:0")
    assert str(e.value) == ("cutile: unsupported on this GPU (NVIDIA H200, sm_90; needs sm_100+ "
                            "or sm_8x; not Hopper)")
    for sm in (100, 120, 86):  # Blackwell, Ampere/Ada pass the GPU rule (toolchain next)
        monkeypatch.setattr(base, "gpu_identity", lambda d, sm=sm: ("GPU", sm))
        languages.get("cutile").check_device("cuda:0")
    with pytest.raises(BuildError, match=r"^cutile: needs a CUDA GPU \(device is cpu\)$"):
        build.check_requirements(sol, "cpu")


def test_cuda_sources_on_a_cpu_torch_say_why(monkeypatch):
    monkeypatch.setattr(base, "torch_cuda_version", lambda: None)
    sol = _sol(["cuda_cpp"], "k.cu::run", {"k.cu": "__global__ void k() {}\n"})
    with pytest.raises(BuildError, match=r"^cuda_cpp: CUDA sources need a CUDA build of torch"):
        build.check_requirements(sol, "cpu")
    build.check_requirements(_sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": ""}), "cpu")


def test_import_of_an_unlisted_dsl_gets_the_install_hint():
    e = ModuleNotFoundError("No module named 'cuda.tile'", name="cuda.tile")
    assert build._install_hint_for(e) == " (pip install 'solbench[cutile]')"
    assert build._install_hint_for(ModuleNotFoundError("x", name="nonexistent_pkg")) == ""


@pytest.mark.slow
def test_missing_toolchain_is_the_reason_in_the_trace_and_table(tmp_path, monkeypatch):
    """End to end on the CPU: a tvm_ffi solution where apache-tvm-ffi is absent is
    COMPILE_ERROR whose log's first line (the table's reason) is the install command."""
    if base.Requirement("x", module="tvm_ffi").missing() is None:
        pytest.skip("apache-tvm-ffi is installed here")
    from rich.console import Console

    from solbench.harness import EvalConfig
    from solbench.run.session import evaluate_and_score
    from solbench.report.tables import trace_table
    from solbench.spec import Status, load_problem

    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    prob = load_problem(Path(__file__).resolve().parents[2] / "src/solbench/suites/data/l1/relu_fp32")
    sol = Solution.model_validate({
        "name": "ffi", "definition": prob.definition.name,
        "spec": {"languages": ["tvm_ffi"], "entry_point": "k.py::run"},
        "sources": [{"path": "k.py", "content": "import tvm_ffi\ndef run(x, y):\n    y.copy_(x.relu())\n"}]})
    traces = evaluate_and_score(prob, sol, EvalConfig(device="cpu", rounds=1, timing=False))
    ev = traces[0].evaluation
    assert ev.status == Status.COMPILE_ERROR
    assert ev.log.splitlines()[0] == ("tvm_ffi: TVM-FFI not found (import tvm_ffi): "
                                      "pip install 'solbench[tvm-ffi]'")
    con = Console(width=400, record=True)
    con.print(trace_table(traces))
    assert "pip install 'solbench[tvm-ffi]'" in con.export_text()


# -- the C++ build path ----------------------------------------------------------------


def test_first_error_line_of_real_compiler_logs():
    ninja_gcc = textwrap.dedent("""\
        [1/2] c++ -MMD -MF k.o.d -DTORCH_EXTENSION_NAME=x -O3 -c /c/k.cpp -o k.o
        FAILED: k.o
        c++ -MMD -MF k.o.d -DTORCH_EXTENSION_NAME=x -O3 -c /c/k.cpp -o k.o
        /c/k.cpp: In function 'int run(int)':
        /c/k.cpp:3:12: error: expected ';' before '}' token
        ninja: build stopped: subcommand failed.
        RuntimeError: Error building extension 'x'""")
    assert first_error_line(ninja_gcc) == "/c/k.cpp:3:12: error: expected ';' before '}' token"
    nvcc = ("[1/3] /usr/local/cuda/bin/nvcc -c kernel.cu -o kernel.cuda.o\nFAILED: kernel.cuda.o\n"
            "/s/kernel.cu:3:10: fatal error: cutlass/gemm/device/gemm.h: No such file or directory\n"
            "compilation terminated.\n")
    assert first_error_line(nvcc) == ("/s/kernel.cu:3:10: fatal error: cutlass/gemm/device/gemm.h: "
                                      "No such file or directory")
    link = "[3/3] c++ a.o -o x.so -lcudnn\nFAILED: x.so\n/usr/bin/ld: cannot find -lcudnn: No such file\n"
    assert first_error_line(link) == "/usr/bin/ld: cannot find -lcudnn: No such file"
    assert first_error_line("[1/1] ok\n") is None


def test_run_build_timeout_kills_the_whole_build_tree(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = (f"import subprocess, time\np = subprocess.Popen(['sleep', '60'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(p.pid))\ntime.sleep(60)\n")
    t0 = time.monotonic()
    with pytest.raises(BuildTimeout, match="timed out after 2 s"):
        run_build([sys.executable, "-c", script], cwd=str(tmp_path), env=None, timeout=2)
    assert time.monotonic() - t0 < 20
    gpid = int(pidfile.read_text())
    for _ in range(50):  # the grandchild (a stand-in for nvcc under ninja) is gone too
        if not Path(f"/proc/{gpid}").exists() or "Z" in _state(gpid):
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{gpid}").exists() or "Z" in _state(gpid)


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_build_timeout_is_one_line_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))

    def slow(cmd, cwd, env, timeout):
        raise BuildTimeout("x")

    monkeypatch.setattr(build, "run_build", slow)
    with pytest.raises(BuildError, match=r"^cuda_cpp: C\+\+ build timed out after 7 s$"):
        build.build_cpp(_sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int x;\n"}), "cpu", 7)


def test_build_key_changes_with_the_toolchain(monkeypatch):
    sol = _sol(["cutlass"], "k.cu::run", {"k.cu": "int x;\n"})
    monkeypatch.setattr(base.Requirement, "version", lambda self: "4.2.0.0")
    k1 = build.cpp_build_key(sol, "cpu")
    assert build.cpp_build_key(sol, "cpu") == k1
    monkeypatch.setattr(base.Requirement, "version", lambda self: "4.3.0.0")
    assert build.cpp_build_key(sol, "cpu") != k1  # a new CUTLASS rebuilds


def test_cache_hit_does_not_run_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    calls = []

    def fake_build(cmd, cwd, env, timeout):
        job = json.loads(cmd[-1])
        calls.append(job)
        so = Path(job["build_directory"]) / "m.so"
        so.write_text("")
        return build.BuildResult(0, f"{so}\n", "")

    monkeypatch.setattr(build, "run_build", fake_build)
    sol = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int x;\n"})
    p1 = build.build_cpp(sol, "cpu", 60)
    p2 = build.build_cpp(sol, "cpu", 60)
    assert p1 == p2 and len(calls) == 1
    build.build_cpp(_sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int y;\n"}), "cpu", 60)
    assert len(calls) == 2  # other source, other key


def test_cpp_job_carries_the_plugins_include_dirs_and_link_flags(tmp_path, monkeypatch):
    import dataclasses

    lang = dataclasses.replace(languages.get("cutlass"), include_dirs=lambda: ["/cutlass/include"])
    monkeypatch.setitem(languages.LANGUAGES, "cutlass", lang)
    sol = _sol(["cutlass", "cublas"], "main.cpp::run", {"main.cpp": "", "k.cu": "", "k.h": ""},
               compile_options={"ld_flags": ["-lcuda"]})
    job = build._cpp_job(sol, "key", tmp_path / "b", tmp_path / "s")
    assert job["include"] == [str(tmp_path / "s"), "/cutlass/include"]
    assert job["ld_flags"] == ["-lcuda", "-lcublas", "-lcublasLt"]
    assert [Path(p).name for p in job["sources"]] == ["main.cpp", "k.cu"]  # headers are included


_CXX = base.HOST_CXX.missing() is None and base.NINJA.missing() is None


@pytest.mark.slow
@pytest.mark.skipif(not _CXX, reason="no host C++ compiler or ninja")
def test_bad_source_first_compiler_line_then_cache_hit(tmp_path, monkeypatch):
    """Real builds with the host compiler: a syntax error is COMPILE_ERROR whose first line is
    gcc's; a good module builds once and is then served from the cache (no build process)."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    bad = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int run(int a) {\n  return a + 1\n}\n"})
    with pytest.raises(BuildError) as e:
        build.build_cpp(bad, "cpu", 300)
    first = str(e.value).splitlines()[0]
    assert first.startswith("cuda_cpp: C++ build failed: ") and "k.cpp:2:" in first
    assert "error: expected" in first
    good = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": textwrap.dedent("""\
        #include <pybind11/pybind11.h>
        static int run(int a) { return a + 1; }
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
        """)})
    n0 = build.BUILD_COUNT
    fn, info = build.load_entry(good, "cpu", (), 0, 300)
    assert fn(41) == 42 and build.BUILD_COUNT == n0 + 1
    so = Path(info["module_path"])
    mtime = so.stat().st_mtime_ns
    assert build.build_cpp(good, "cpu", 300) == so
    assert build.BUILD_COUNT == n0 + 1 and so.stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_cuda_source_with_a_syntax_error(tmp_path, monkeypatch):
    """Where torch has CUDA and nvcc exists the .cu is compiled and nvcc's diagnostic is the
    first line; elsewhere the first line is the missing-toolchain reason (no build runs)."""
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path))
    src = "__global__ void k(float* x) {\n  x[0] = 1.0f\n}\n"
    sol = _sol(["cuda_cpp"], "k.cu::run", {"k.cu": src})
    n0 = build.BUILD_COUNT
    with pytest.raises(BuildError) as e:
        build.load_entry(sol, "cuda:0", (), 0, 600)
    first = str(e.value).splitlines()[0]
    if base.torch_cuda_version() is None:
        assert first == "cuda_cpp: CUDA sources need a CUDA build of torch (this one is CPU-only)"
        assert build.BUILD_COUNT == n0
    elif base.cuda_home() is None:
        assert first == "cuda_cpp: CUDA sources need the CUDA toolkit (nvcc): set CUDA_HOME"
    else:
        assert first.startswith("cuda_cpp: C++ build failed: k.cu(2): error: expected")


# -- allow-list and audit hooks ------------------------------------------------------------


def test_allow_list_is_the_union_of_the_plugins():
    for lang in languages.LANGUAGES.values():
        for tool in lang.child_tools:
            assert tool in guards.ALLOWED_CHILD_CMDLINE
            assert guards._allowed(f"/usr/bin/{tool} -x", exe=tool)
            assert not guards._allowed(f"/usr/bin/{tool} -x", exe=tool, late=True)
        for mod in lang.child_modules:
            assert guards._allowed(f"{sys.executable} -m {mod} x")
    assert guards._allowed("tileiras k.bc", exe="tileiras")  # cuTile's compiler
    assert not guards._allowed("sleep 60", exe="sleep")


FP32 = {"float32"}


def _checks(sources, langs, dtypes=FP32):
    return sorted((f.check, f.evidence["line"]) for f in audit_sources(sources, dtypes, langs))


def test_audit_cutlass_reduced_types_against_the_floor():
    cu = "#include <cutlass/numeric_types.h>\nusing T = cutlass::half_t;\nusing A = float;\n"
    assert _checks({"k.cu": cu}, ["cutlass"]) == [("audit.precision_cast", 2)]
    assert _checks({"k.cu": cu}, ["cutlass"], {"float16"}) == []
    tf = "using M = cutlass::tfloat32_t;\n"
    assert _checks({"k.cu": tf}, ["cutlass"]) == [("audit.precision_cast", 1)]
    assert _checks({"k.cu": tf}, ["cutlass"], {"bfloat16"}) == []  # tf32 is above bf16


def test_audit_cudnn_half_data_type():
    cu = "cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, n, c, 1, 1);\n"
    assert _checks({"main.cu": cu}, ["cudnn"]) == [("audit.precision_cast", 1)]
    assert _checks({"main.cu": cu.replace("HALF", "FLOAT")}, ["cudnn"]) == []


def test_audit_dsl_dtypes_and_casts():
    cute = textwrap.dedent("""\
        import cutlass
        import cutlass.cute as cute
        def run(a):
            x = a.load().to(cutlass.Float16)
            y = a.load().to(cutlass.Float32)
            return x
        """)
    assert _checks({"k.py": cute}, ["cute_dsl"]) == [("audit.precision_cast", 4)]
    tile = textwrap.dedent("""\
        import cuda.tile as ct
        @ct.kernel
        def k(A, B):
            a = ct.load(A, index=(0,), shape=(16,)).astype(ct.bfloat16)
            b = ct.astype(a, ct.float32)
            ct.store(B, index=(0,), tile=b)
        """)
    assert _checks({"k.py": tile}, ["cutile"]) == [("audit.precision_cast", 4)]
    assert _checks({"k.py": tile}, ["cutile"], {"bfloat16"}) == []


def test_audit_driver_stream_in_a_dsl():
    src = "from cuda.bindings import driver\ndef run(x):\n    s = driver.cuStreamCreate(0)\n"
    assert ("audit.side_stream", 3) in _checks({"k.py": src}, ["cute_dsl"])


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"upstream examples not found at {EXAMPLES}")
def test_upstream_examples_raise_no_hack_level_audit_noise():
    """The honest upstream examples: no findings beyond advisories their code really has
    (cuTile's example casts fp32 operands to tf32 on purpose; its problem is bf16)."""
    from solbench.integrity.static_audit import audit_solution
    from solbench.spec import load_problem

    for path in _examples():
        sol = Solution.model_validate(json.loads(path.read_text()))
        found = audit_solution(sol, load_problem(path.parent).definition)
        assert all(f.severity == "advisory" for f in found)
        assert not [f for f in found if f.check in ("audit.monkey_patch", "audit.harness_access",
                                                    "audit.process", "audit.side_stream")], \
            (path, [(f.check, f.evidence) for f in found])


# -- ahead-of-time builds into the shared build cache (harness/prebuild.py) ----------------

HOSTILE = Path(__file__).resolve().parent / "hostile"
_PYBIND_RUN = textwrap.dedent("""\
    #include <pybind11/pybind11.h>
    static int run(int a) { return a + %d; }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
    """)


def _relu_problem():
    from solbench.spec import load_problem

    return load_problem(Path(__file__).resolve().parents[2] / "src/solbench/suites/data/l1/relu_fp32")


def _shared_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SOLBENCH_CACHE", str(tmp_path / "private"))
    monkeypatch.setenv("SOLBENCH_BUILD_CACHE", str(tmp_path / "shared"))
    return tmp_path / "shared"


def test_shared_cache_lookup_and_movable_build_dir(tmp_path, monkeypatch):
    """build_cpp takes a module filed under its key in $SOLBENCH_BUILD_CACHE without a build
    (``shared``); a module under another key is not taken; module_path.txt names the file
    inside its own folder, so a build dir that moved (filed by the harness) still resolves."""
    shared = _shared_cache(tmp_path, monkeypatch)
    sol = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int x;\n"})
    key = build.cpp_build_key(sol, "cpu")
    d = shared / "cpp" / key
    d.mkdir(parents=True)
    (d / "solbench_cpp_x.so").write_text("")
    (d / "module_path.txt").write_text("/tmp/solbench-build-out/solbench_cpp_x.so\n")
    calls = []
    monkeypatch.setattr(build, "run_build", lambda *a, **k: calls.append(a) or build.BuildResult(1, "", "x"))
    assert build.build_cpp(sol, "cpu", 60) == d / "solbench_cpp_x.so"
    assert build.LAST_BUILD_SOURCE == "shared" and calls == []
    other = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": "int y;\n"})
    with pytest.raises(BuildError):  # not in the cache: it builds (here: the stub fails)
        build.build_cpp(other, "cpu", 60)
    assert len(calls) == 1


def test_prebuild_of_a_python_solution_or_a_missing_toolchain_is_one_line(tmp_path, monkeypatch):
    from solbench.harness import EvalConfig
    from solbench.harness.prebuild import prebuild

    _shared_cache(tmp_path, monkeypatch)
    cfg = EvalConfig(device="cpu")
    py = _sol(["pytorch"], "k.py::run", {"k.py": "def run(x, y):\n    y.copy_(x)\n"})
    assert prebuild(_relu_problem(), py, cfg)["status"] == "skipped"
    cu = _sol(["cuda_cpp"], "k.cu::run", {"k.cu": "__global__ void k() {}\n"})
    r = prebuild(_relu_problem(), cu, cfg)
    if base.torch_cuda_version() is None:
        assert r["status"] == "failed" and r["reason"] == (
            "cuda_cpp: CUDA sources need a CUDA build of torch (this one is CPU-only)")


@pytest.mark.slow
@pytest.mark.skipif(not _CXX, reason="no host C++ compiler or ninja")
def test_prebuild_fills_the_shared_cache_and_the_candidate_worker_loads_it(tmp_path, monkeypatch):
    """A real build in its own sandboxed worker is filed under the harness's key; building
    again runs nothing; the candidate's worker then loads it from the shared cache instead of
    compiling, while a solution with other source compiles in its own worker."""
    from solbench.harness import EvalConfig
    from solbench.harness.prebuild import CPP_DIR_MODE, prebuild
    from solbench.harness.workers import start_candidate

    shared = _shared_cache(tmp_path, monkeypatch)
    cfg = EvalConfig(device="cpu", build_timeout_s=300)
    prob = _relu_problem()
    sol = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": _PYBIND_RUN % 1})
    r = prebuild(prob, sol, cfg)
    key = build.cpp_build_key(sol, "cpu")
    assert (r["status"], r["key"], r["reason"]) == ("built", key, "")
    filed = shared / "cpp" / key
    assert build.built_module(filed) == filed / f"solbench_cpp_{key}.so"
    assert (shared / "cpp").stat().st_mode & 0o777 == CPP_DIR_MODE
    assert all(p.stat().st_uid == os.geteuid() and not p.stat().st_mode & 0o022
               for p in [filed, *filed.rglob("*")])
    assert [p.name for p in (shared / "cpp").iterdir()] == [key]  # no staging left
    assert prebuild(prob, sol, cfg)["status"] == "cached"
    h, fail = start_candidate(prob, sol, cfg)
    assert fail is None, fail
    try:
        assert h.build_cache == "shared"
    finally:
        h.close()
    other = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": _PYBIND_RUN % 2})
    h, fail = start_candidate(prob, other, cfg)
    assert fail is None, fail
    try:
        assert h.build_cache == "built"
    finally:
        h.close()


@pytest.mark.slow
@pytest.mark.skipif(not _CXX, reason="no host C++ compiler or ninja")
def test_hostile_build_reaches_nothing_but_its_own_output(tmp_path, monkeypatch):
    """tests/languages/hostile/plant_build_cache.cpp, run at import by its ahead-of-time
    build, tries to list the shared cache, plant a module under another key (in the cache and
    beside its output) and leave a link to a host file: the build is filed under its own key
    with no link, and nothing else appears in the cache."""
    from solbench.harness import EvalConfig
    from solbench.harness.prebuild import prebuild

    shared = _shared_cache(tmp_path, monkeypatch)
    (shared / "cpp").mkdir(parents=True)
    cfg = EvalConfig(device="cpu", build_timeout_s=300)
    sol = _sol(["cuda_cpp"], "k.cpp::run", {"k.cpp": (HOSTILE / "plant_build_cache.cpp").read_text()})
    r = prebuild(_relu_problem(), sol, cfg)
    key = build.cpp_build_key(sol, "cpu")
    assert r["status"] == "built", r
    filed = shared / "cpp" / key
    assert sorted(p.name for p in (shared / "cpp").iterdir()) == [key]
    assert not any(p.is_symlink() for p in filed.rglob("*"))
    attempted = (filed / "planted.txt").read_text()
    for breach in ("listed", "planted-shared", "wrote-shared"):
        assert breach not in attempted
    assert "linked" in attempted  # it did make the link, in its own output: removed on filing
