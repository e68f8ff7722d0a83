"""Static audit: each rule fires on its pattern with the right file:line and snippet, and the
honest idioms the brief names (torch.compile, triton.autotune, torch.cuda.CUDAGraph,
torch.matmul, load_inline) raise nothing."""

import textwrap
import tomllib
from pathlib import Path

import pytest

from solbench.integrity.static_audit import audit_sources, audit_solution
from solbench.spec import load_problem, load_solution

HERE = Path(__file__).parent
FP32 = {"float32"}


def checks(src: str, dtypes=FP32, path="cand.py") -> list[tuple[str, int]]:
    return [(f.check, f.evidence["line"]) for f in audit_sources({path: textwrap.dedent(src)}, dtypes)]


def rules(src: str, dtypes=FP32) -> set[str]:
    return {c for c, _ in checks(src, dtypes)}


# ----------------------------------------------------------------------------- honest idioms

HONEST = {
    "torch.compile": """
        import torch
        torch._inductor.config.coordinate_descent_tuning = True
        torch._dynamo.config.cache_size_limit = 64
        torch.backends.cudnn.benchmark = True
        @torch.compile(mode="max-autotune")
        def f(x):
            return torch.nn.functional.gelu(x)
        def run(x):
            return f(x)
    """,
    "triton.autotune": """
        import torch, triton
        import triton.language as tl
        @triton.autotune(configs=[triton.Config({"B": 128})], key=["n"])
        @triton.jit
        def k(x_ptr, o_ptr, a_ptr, b_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            x = tl.load(x_ptr + offs, mask=offs < n)
            acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr), input_precision="ieee")
            tl.store(o_ptr + offs, x.to(tl.float32), mask=offs < n)
        def run(x):
            out = torch.empty_like(x)
            k[(triton.cdiv(x.numel(), 128),)](x, out, x, x, x.numel())
            return out
    """,
    "CUDAGraph": """
        import torch
        _G = {}
        def run(x):
            key = tuple(x.shape)
            if key not in _G:
                sx = x.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    torch.relu(sx)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    so = torch.relu(sx)
                _G[key] = (g, sx, so)
            g, sx, so = _G[key]
            sx.copy_(x)
            g.replay()
            return so.clone()
    """,
    "torch.matmul": """
        import torch
        def run(a, b):
            return torch.matmul(a, b).to(a.dtype)
    """,
    "load_inline": '''
        import os
        import torch
        from torch.utils.cpp_extension import load_inline
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
        src = """
        #include <torch/extension.h>
        __global__ void k(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;  // exit(1) in a comment is fine
            if (i < n) y[i] = x[i] * 2.0f;
        }
        torch::Tensor run(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
        """
        mod = load_inline(name="m", cpp_sources="torch::Tensor run(torch::Tensor x);",
                          cuda_sources=src, functions=["run"])
        def run(x):
            return mod.run(x)
    ''',
    "shape-keyed kernel cache": """
        import torch
        _KERNELS = {}
        def _build(m, n):
            return lambda x: x * 2
        def run(x):
            m, n = x.shape
            if (m, n) not in _KERNELS:
                _KERNELS[(m, n)] = _build(m, n)
            return _KERNELS[(m, n)](x)
    """,
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_idioms_raise_nothing(name):
    assert checks(HONEST[name]) == []


# ----------------------------------------------------------------------------- hostile rules

def test_monkey_patch_through_aliases_setattr_and_sys_modules():
    src = """
        import time
        import torch.cuda as tc
        from torch import cuda
        import builtins, sys
        ev = torch_cuda = None
        time.perf_counter = lambda: 0.0
        tc.synchronize = lambda: None
        setattr(cuda, "Event", object)
        builtins.isinstance = lambda a, b: True
        sys.modules["time"].monotonic = lambda: 0.0
        vars(time)["time"] = lambda: 0.0
        def run(x):
            return x
    """
    got = checks(src)
    assert [line for c, line in got if c == "audit.monkey_patch"] == [7, 8, 9, 10, 11, 12]


def test_config_flags_are_not_patches_but_tf32_is_a_precision_flag():
    src = """
        import torch
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("high")
        torch.set_float32_matmul_precision("highest")
    """
    assert checks(src) == [("audit.precision_flag", 4), ("audit.precision_flag", 6)]
    # a bf16 problem: TF32 concerns fp32 operands only
    assert checks(src, {"bfloat16"}) == []


def test_precision_casts_depend_on_the_declared_floor():
    src = """
        import torch
        import triton.language as tl
        def run(x, w):
            a = x.half()
            b = x.to(torch.bfloat16)
            c = x.to(dtype=torch.float8_e4m3fn)
            d = torch.empty(4, dtype=torch.float16)
            with torch.autocast("cuda"):
                e = x @ w
            f = x.to(torch.float32)
            g = x.to(x.dtype)
            h = x.double().float()
            return a, b, c, d, e, f, g, h
    """
    assert checks(src) == [("audit.precision_cast", n) for n in (5, 6, 7, 8, 9)]
    # declared bf16: only fp8 (and fp16's autocast default is not below bf16's 7 bits) remain
    assert checks(src, {"bfloat16", "float32"}) == [("audit.precision_cast", 7)]
    # nothing declared: no precision rule
    assert checks(src, set()) == []


def test_triton_dot_defaults_to_tf32_on_fp32_problems():
    src = """
        import triton.language as tl
        def k(a, b):
            x = tl.dot(a, b)
            y = tl.dot(a, b, input_precision="ieee")
            z = tl.dot(a, b, allow_tf32=False)
    """
    assert checks(src) == [("audit.precision_flag", 4)]


def test_caches_keyed_by_pointer_id_content_or_returned_by_shape():
    src = """
        import hashlib
        _A, _B, _C, _D, _E = {}, {}, {}, {}, {}
        _OUT = None
        def run(x):
            global _OUT
            _A[x.data_ptr()] = x
            _B[id(x)] = x
            key = hashlib.sha1(x.numpy().tobytes()).hexdigest()
            _C[key] = x
            s = tuple(x.shape)
            if s in _D:
                return _D[s]
            _D[s] = x * 2
            _E[s] = "plan"
            if _OUT is None:
                _OUT = x * 2
            return _OUT
    """
    got = [line for c, line in checks(src) if c == "audit.global_cache"]
    # data_ptr (7), id (8), content (10), shape + returned (14), memoised global (18);
    # the shape-keyed plan cache (15) is not flagged
    assert got == [7, 8, 10, 14, 18]


def test_local_dicts_are_not_caches():
    src = """
        def run(x):
            cache = {}
            cache[id(x)] = x
            return cache[id(x)]
    """
    assert checks(src) == []


def test_self_attribute_cache_in_a_module():
    src = """
        import torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = {}
            def forward(self, x):
                k = x.data_ptr()
                if k not in self.cache:
                    self.cache[k] = x.relu()
                return self.cache[k]
    """
    assert checks(src) == [("audit.global_cache", 10)]


def test_threads_processes_ctypes_exits_streams():
    src = """
        import threading, os, sys, subprocess, ctypes
        from concurrent.futures import ThreadPoolExecutor
        import torch
        def run(x):
            threading.Thread(target=print).start()
            ThreadPoolExecutor(2)
            os.fork()
            subprocess.Popen(["true"])
            ctypes.string_at(0)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                y = x * 2
            sys.exit(0)
    """
    got = checks(src)
    assert ("audit.thread", 6) in got and ("audit.thread", 7) in got
    assert ("audit.process", 8) in got and ("audit.process", 9) in got
    assert ("audit.process", 2) in got and ("audit.ctypes", 2) in got  # the imports
    assert ("audit.ctypes", 10) in got
    assert ("audit.side_stream", 11) in got and ("audit.side_stream", 12) in got
    assert ("audit.exit", 14) in got


def test_introspection_file_env_and_verdict_strings():
    src = '''
        """Docstrings may say PASSED without a finding."""
        import gc, sys, inspect, os
        def run(x):
            gc.get_objects()
            f = sys._getframe(1).f_back
            inspect.stack()
            open("/tmp/x").read()
            v = os.environ.get("SEED")
            w = os.environ["HOME"]
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
            os.environ["SOLBENCH_X"] = "1"
            print('{"status": "PASSED"}')
            return x
    '''
    got = checks(src)
    assert ("audit.introspection", 5) in got
    assert ("audit.introspection", 6) in got
    assert ("audit.introspection", 7) in got
    assert ("audit.file_access", 8) in got
    assert ("audit.env_access", 9) in got and ("audit.env_access", 10) in got
    assert ("audit.env_access", 11) not in got  # a build variable
    assert ("audit.env_access", 12) in got
    assert ("audit.verdict_string", 13) in got
    assert not any(line == 2 for _, line in got)


def test_tensor_subclass_and_harness_import():
    src = """
        import torch
        import solbench.harness
        class Lazy(torch.Tensor):
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return func(*args)
    """
    got = checks(src)
    assert ("audit.harness_access", 3) in got
    assert ("audit.tensor_subclass", 4) in got and ("audit.tensor_subclass", 5) in got


def test_cpp_sources_are_tokenised_not_grepped():
    cu = """
    // cudaStreamCreate in a comment, "exit(1)" in a string
    #include <cuda_fp16.h>
    __global__ void k(float* x) { __half h = __float2half(x[0]); }
    void f() { cudaStream_t s; cudaStreamCreate(&s); std::thread t(g); obj.exit(); }
    """
    got = checks(cu, path="k.cu")
    assert got == [("audit.precision_cast", 4), ("audit.side_stream", 5), ("audit.thread", 5)]
    assert checks(cu, dtypes={"float16"}, path="k.cu") == [("audit.side_stream", 5), ("audit.thread", 5)]


def test_evidence_carries_file_line_and_snippet():
    f = audit_sources({"pkg/k.py": "import time\ntime.time = lambda: 0\n"}, FP32)[0]
    assert f.severity == "advisory"
    assert f.evidence == {"file": "pkg/k.py", "line": 2, "snippet": "time.time = lambda: 0"}


def test_syntax_error_is_a_finding_not_an_exception():
    f = audit_sources({"bad.py": "def run(:\n"}, FP32)
    assert [x.check for x in f] == ["audit.syntax"]


# ----------------------------------------------------------------------------- the corpus

def _corpus():
    return tomllib.loads((HERE / "corpus.toml").read_text())["candidate"]


@pytest.mark.parametrize("entry", _corpus(), ids=lambda e: e["file"])
def test_corpus_static_expectations(entry):
    problem = load_problem(HERE / entry["problem"])
    sol = load_solution(HERE / entry["file"], problem)
    got = {f.check for f in audit_solution(sol, problem.definition)}
    if entry["kind"] == "honest":
        assert got == set()
    else:
        assert set(entry["static"]) <= got
