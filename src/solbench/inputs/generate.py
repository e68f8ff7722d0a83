"""Input generation for one workload (trusted side: runs in the parent, never the worker).

Every random tensor input gets a rule from :mod:`solbench.inputs.rules` (upstream
SOL-ExecBench's rules by dtype, name, shape and description, or a declared solbench role),
then values by the rule and the *profile* (docs/inputs.md has the table and sources):

- ``upstream``: exactly upstream's distributions, so a kernel correct there is correct here.
- ``strict``: upstream's, except where upstream's value hides a bug: normalisation weights
  are U(0.5, 1.5) instead of exactly 1, normalisation biases 0.5 randn instead of exactly 0
  (a kernel ignoring them passes with the defaults), and a causal mask whose description
  says ``-inf`` holds ``-inf`` (upstream writes ``finfo.min``).
- ``stress``: strict's, and the plain data inputs (rule ``randn``) drawn from a distribution
  chosen by the definition's op class (:mod:`solbench.inputs.opclass`): for softmax-like ops
  and normalisations a random subset of rows offset by +-100..1000 (at least one of each
  sign; normalisations also constant small-integer rows) beside ordinary randn rows that
  carry single spikes; spread magnitudes with exact zeros otherwise.
- ``stress_sparse``: strict's, and the plain data inputs upstream's randn with 1 to 4 spikes
  at random positions: what a candidate that samples its inputs to spot a stress round sees
  as an upstream input.

Custom-input workloads (``custom_inputs_entrypoint``) and safetensors inputs are the same in
every profile: their values belong to the problem. :func:`differing_profiles` says which
profiles give other values than ``upstream`` for a workload, so a caller runs only the rounds
that test something.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .. import paths
from ..errors import MissingBlobError, SpecError
from ..spec.dtypes import to_torch
from ..spec.problem import GLOBAL_RNG_LOCK, Problem, find_blob
from ..spec.workload import CustomInput, SafetensorsInput, ScalarInput, Workload
from .opclass import op_classes
from .rules import InputRule, classify

#: the input profiles :func:`make_inputs` accepts
PROFILES = ("upstream", "strict", "stress", "stress_sparse")
#: the profiles of the stress rounds (judged against the reference only where it holds)
STRESS_PROFILES = ("stress", "stress_sparse")

#: rules whose values differ under ``strict`` (and so under ``stress``) from ``upstream``
STRICT_RULES = frozenset({"norm_weight_ones", "norm_bias_zeros"})
#: rules whose inputs the stress distribution replaces
STRESS_RULES = frozenset({"randn"})
_STRESS_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def seed_global(seed: int, device: str) -> None:
    """Seed the global generators a custom-input entrypoint on ``device`` draws from, as
    ``torch.manual_seed(seed)`` does (formats.md's custom-input protocol): the CPU default
    generator, and every CUDA device's where ``device`` is CUDA or this process has or can
    start CUDA (``torch.cuda.manual_seed_all``, queued until CUDA starts, as manual_seed
    does). Left out are the backends solbench never starts (XPU, MTIA, MPS, a PrivateUse1
    device): ``torch.manual_seed`` queues a seed for each of them, with a formatted copy of
    the call stack each time (``traceback.format_stack``), about 1 ms a call on a 2-core CPU,
    most of a small custom workload's input generation
    (bench/results/overhead_cpu_before.md). Values drawn on the CPU or a CUDA device are the
    same as after ``torch.manual_seed(seed)`` (tests/inputs/test_seed_global.py)."""
    seed = int(seed)
    torch.random.default_generator.manual_seed(seed)
    if torch.device(device).type == "cuda" or torch.cuda.is_initialized() or torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


#: elements from which a CPU draw of independent values is made in chunks on a thread pool
#: (:func:`_iid`); also the chunk's size. Fixed, so the values never depend on the number of
#: threads or cores
PARALLEL_CHUNK = 1 << 20
_POOL: list = []


#: environment variable: threads drawing a large input set (default: the cores this process
#: may use, at most 16; 1: in the calling thread). The values do not depend on it.
THREADS_ENV = paths.INPUT_THREADS


def _pool():
    """The thread pool of :func:`_iid` (one per process, made at first use), or None for one
    thread (``$SOLBENCH_INPUT_THREADS``). torch's CPU ``normal_`` / ``uniform_`` with a
    generator run serially in the calling thread and release the GIL, so the threads work
    side by side, and start no OpenMP team that could spin after the call."""
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        if paths.input_threads() is not None:
            n = paths.input_threads()
        n = max(1, min(16, n))
        _POOL.append(ThreadPoolExecutor(max_workers=n, thread_name_prefix="solbench-inputs") if n > 1 else None)
    return _POOL[0]


def _chunk_seed(sub: int, j: int) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(f"{sub}:{j}".encode(), digest_size=8).digest(), "little")


def _iid(shape, kind: str, g: torch.Generator, dev: torch.device, lo: float = 0.0,
         hi: float = 1.0, serial: bool = False) -> torch.Tensor:
    """float32 ``shape`` of independent standard normal (``kind`` "normal") or U(lo, hi)
    ("uniform") values drawn with ``g``.

    A CPU tensor of at least :data:`PARALLEL_CHUNK` elements is drawn in chunks of that many
    on a thread pool, chunk j with its own generator seeded from (a 63-bit value drawn from
    ``g``, j): about as many times faster as there are cores (input generation was most of a
    large CPU evaluation, every timed call needing a fresh set). The values are as
    unpredictable as ``g``'s: every chunk's seed derives from ``g``'s state, itself seeded
    by the input set's secret seed. Smaller tensors, CUDA tensors and ``serial`` draws are
    drawn with ``g`` directly, as before (the same values for the same seed)."""
    n = math.prod(shape) if len(shape) else 1
    if dev.type != "cpu" or n < PARALLEL_CHUNK or serial:
        if kind == "normal":
            return torch.randn(shape, generator=g, device=dev)
        return torch.rand(shape, generator=g, device=dev) * (hi - lo) + lo
    sub = int(torch.randint(0, 2**62, (), generator=g).item())
    out = torch.empty(shape, dtype=torch.float32)
    flat = out.view(-1)

    def fill(j: int) -> None:
        gj = torch.Generator().manual_seed(_chunk_seed(sub, j))
        c = flat[j * PARALLEL_CHUNK:(j + 1) * PARALLEL_CHUNK]
        if kind == "normal":
            c.normal_(generator=gj)
        else:
            c.uniform_(lo, hi, generator=gj)

    chunks = range((n + PARALLEL_CHUNK - 1) // PARALLEL_CHUNK)
    pool = _pool()
    list(pool.map(fill, chunks) if pool is not None else map(fill, chunks))
    return out


def _generator(seed: int, device: str) -> torch.Generator:
    dev = torch.device(device)
    g = torch.Generator(device=dev if dev.type == "cuda" else "cpu")
    g.manual_seed(seed)
    return g


def _fp4_quantize(x: torch.Tensor) -> torch.Tensor:
    """Round float32 ``x`` [..., 2n] to the nearest e2m1 code (ties as upstream: 0.25 -> 0,
    0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4; beyond 6 saturates) and pack
    two codes a byte (low nibble first) into ``float4_e2m1fn_x2`` [..., n]."""
    a = x.abs()
    # magnitude code 0..7 for 0, 0.5, 1, 1.5, 2, 3, 4, 6; "<=" or "<" per boundary as upstream
    code = torch.zeros_like(a, dtype=torch.int32)
    for bound, inclusive in ((0.25, True), (0.75, False), (1.25, True), (1.75, False),
                             (2.5, True), (3.5, False), (5.0, True)):
        code += (a > bound).int() if inclusive else (a >= bound).int()
    code = code + 8 * (x < 0).int()
    code = code.to(torch.uint8)
    packed = code[..., ::2] + code[..., 1::2] * 16
    return packed.view(torch.float4_e2m1fn_x2)


def _causal(shape, dtype, dev, fill: float) -> torch.Tensor:
    n = shape[-1]
    mask = torch.zeros(shape, dtype=dtype, device=dev)
    above = torch.triu(torch.ones(n, n, device=dev, dtype=torch.bool), diagonal=1)
    mask[..., above] = fill
    return mask


#: magnitude range of the stress offsets and spikes (exp overflows float32 above about 88.7,
#: underflows to 0 below about -103: a softmax without the max subtraction gives inf / inf or
#: 0 / 0 either way)
STRESS_LO, STRESS_HI = 100.0, 1000.0


def _spikes(x: torch.Tensor, rows_mask: torch.Tensor | None, n: int, value, g, dev) -> torch.Tensor:
    """``x`` with ``n`` single elements replaced by ``value(n)`` (a tensor of n values), at
    positions drawn uniformly (with ``g``) from the rows where ``rows_mask`` is true (every
    element when None). The positions are the round's, not fixed: a probe that reads a few
    chosen elements misses them."""
    flat = x.reshape(-1).clone()
    cols = x.shape[-1] if x.dim() else 1
    if rows_mask is None:
        pos = torch.randint(0, flat.numel(), (n,), generator=g, device=dev)
    else:
        rows = torch.nonzero(rows_mask.reshape(-1)).reshape(-1)
        if rows.numel() == 0:
            return x
        r = rows[torch.randint(0, rows.numel(), (n,), generator=g, device=dev)]
        pos = r * cols + torch.randint(0, cols, (n,), generator=g, device=dev)
    flat[pos] = value(n)
    return flat.reshape(x.shape)


def _row_kinds(nrows: int, required: tuple[int, ...], probs: tuple[float, ...], g, dev) -> torch.Tensor:
    """Kind of each row (0: ordinary randn; k >= 1 with probability ``probs[k-1]``), with at
    least one row of every kind in ``required`` when there are rows enough (those rows drawn
    at random too, never the first or the last by construction)."""
    u = torch.rand(nrows, generator=g, device=dev)
    kind = torch.zeros(nrows, dtype=torch.long, device=dev)
    edge = 0.0
    for k, p in enumerate(probs, start=1):
        kind[(u >= edge) & (u < edge + p)] = k
        edge += p
    if nrows >= len(required):
        at = torch.randperm(nrows, generator=g, device=dev)[:len(required)]
        kind[at] = torch.tensor(required, device=dev)
    return kind


#: range of offset / spread of a normalisation stress row (``_stress_values``). Measured
#: against an fp64 layer norm over 200 stress sets each of 32 x 256, 16 x 256, 4 x 1024 and
#: 64 x 4096 (99% of the elements within the tolerance): torch's float32 layer norm misses
#: 1e-4 on 0, 0, 1 and 0 sets; a one-pass E[x^2] - E[x]^2 one passes 1e-3 on none and 1e-2
#: on 0, 3, 40 and 0 (a set of few rows holds few offset rows). Above about 750 torch's own
#: error nears 1e-4; below about 500 the one-pass error falls under 1e-2
NORM_RATIO = (550.0, 720.0)


def _stress_values(cls: str, shape, g, dev) -> torch.Tensor:
    """float32 stress values of one data input of a definition of op class ``cls``.

    The hazards sit at positions the round's seed draws, beside rows and elements that look
    like upstream's randn: a random subset of rows is offset by +-U(100, 1000) (at least one
    of each sign), and single spikes sit in ordinary rows. So no statistic of a few chosen
    elements (a column's minimum, the first row, a corner) tells a stress set from an
    upstream one: the all-positive offset of every row that the first version drew made
    "column 0's minimum is above 50" such a statistic (issue 13). docs/inputs.md has the
    table."""
    def randn(*s):
        return torch.randn(s or shape, generator=g, device=dev)

    def rand(*s):
        return torch.rand(s or shape, generator=g, device=dev)

    def mag(n):
        return STRESS_LO + (STRESS_HI - STRESS_LO) * torch.rand(n, generator=g, device=dev)

    def signed(n):
        return torch.where(torch.rand(n, generator=g, device=dev) < 0.5, -1.0, 1.0) * mag(n)

    if cls == "norm" and len(shape) < 2:
        # a normalisation's vector input is its affine weight or bias over the normalised
        # dimension (its data has rows): offset by hundreds it only scaled the output past
        # the problem's absolute tolerance, the float32 reference then missed the fp64 truth
        # and the stress round was dropped (l1/layer_norm_fp32's gamma and beta)
        return randn()
    if cls in ("softmax", "norm"):
        lead = tuple(shape[:-1]) if len(shape) > 1 else (1,)
        cols = shape[-1] if len(shape) else 1
        nrows = math.prod(lead)
        x = torch.randn((nrows, cols), generator=g, device=dev)
        if cls == "softmax":
            # rows offset up (exp overflows without the max subtraction) or down (every exp
            # underflows: 0 / 0), a spread of 3 (near-ties in fp16/bf16); 1/4 each; and
            # low-temperature rows (1/5): randn x U(25, 35), whose float32 softmax is about
            # 15-20% subnormal (max - x between 87.3 and 103.3: outputs below 2^-126 that
            # gradual underflow keeps and flush-to-zero makes exact zeros), with logits
            # past 88.7 too
            kind = _row_kinds(nrows, (1, 2, 3), (0.25, 0.25, 0.2), g, dev)
            off = mag(nrows)
            sign = torch.where(kind == 2, -1.0, 1.0)
            x = torch.where(((kind == 1) | (kind == 2))[:, None], (sign * off)[:, None] + 3.0 * x, x)
            temp = 25.0 + 10.0 * torch.rand(nrows, generator=g, device=dev)
            x = torch.where((kind == 3)[:, None], temp[:, None] * x, x)
            spike = mag  # up: one element above ~88.7 overflows exp
        else:
            # |offset| 100..1000 against a spread of 0.1..3: a one-pass E[x^2] - E[x]^2
            # variance cancels; constant rows (variance exactly 0) at a small integer -2..2:
            # a constant row at a large offset is ill-conditioned (the fp32 mean misses it by
            # an ulp, and that residual over sqrt(eps) (~0.03) made an honest two-pass layer
            # norm differ from torch's by more than 1e-2), an integer row's sum and mean are
            # exact in any summation order
            kind = _row_kinds(nrows, (1, 2, 3), (0.2, 0.2, 0.125), g, dev)
            off = mag(nrows)
            # every offset row's spread is its offset over a ratio R in NORM_RATIO: a one-pass
            # variance's error grows as R^2 x 2^-24 (0.02-0.03 of the variance here), a float32
            # two-pass one's as R x 2^-24 (4e-5): the first misses 1e-3, the second holds 1e-4.
            # A spread drawn apart from the offset gave rows of R up to 10^4, which no float32
            # layer norm (torch's included) normalises to 1e-4: the reference then missed the
            # fp64 truth and the whole stress round was dropped (62 of 100 sets of
            # l1/layer_norm_fp32's 16 x 256 workload), while rows of R below 300 let a one-pass
            # variance pass
            ratio = NORM_RATIO[0] + (NORM_RATIO[1] - NORM_RATIO[0]) * torch.rand(nrows, generator=g, device=dev)
            spread = off / ratio
            sign = torch.where(kind == 2, -1.0, 1.0)
            level = torch.floor(5.0 * torch.rand(nrows, generator=g, device=dev)) - 2.0
            shifted = (sign * off)[:, None] + spread[:, None] * x
            x = torch.where(((kind == 1) | (kind == 2))[:, None], shifted, x)
            x = torch.where((kind == 3)[:, None], level[:, None].expand_as(x), x)
            spike = signed
        plain = kind == 0
        if plain.any():
            # spikes only in ordinary rows: there they are the only hazard, seen only by
            # reading the row's every element
            n = 1 + int(torch.randint(0, max(1, int(plain.sum().item()) // 8) + 1, (), generator=g,
                                      device=dev).item())
            x = _spikes(x, plain, n, spike, g, dev)
        return x.reshape(shape)
    # generic: magnitudes 10^-3..10^2, random sign, 5% exact zeros
    m = torch.pow(10.0, -3.0 + 5.0 * rand())
    x = torch.where(rand() < 0.5, -m, m)
    return torch.where(rand() < 0.05, torch.zeros((), device=dev), x)


def _sparse_values(cls: str, shape, g, dev) -> torch.Tensor:
    """float32 values of the sparse stress set: upstream's randn with 1 to 4 spikes at
    positions drawn by the round's seed (softmax: +U(100, 1000), exp overflows; norm:
    +-U(100, 1000); generic: +-10^U(1, 2)). Every other element is upstream's, so a
    candidate that looks at a sample of its inputs to decide whether this is a stress round
    (and takes a safe path only then) sees an upstream input here and is judged on the spike
    it did not look at."""
    x = torch.randn(shape, generator=g, device=dev)
    if x.numel() == 0:
        return x

    def mag(n):
        return STRESS_LO + (STRESS_HI - STRESS_LO) * torch.rand(n, generator=g, device=dev)

    def sign(n):
        return torch.where(torch.rand(n, generator=g, device=dev) < 0.5, -1.0, 1.0)

    if cls == "softmax":
        value = mag
    elif cls == "norm":
        def value(n):
            return sign(n) * mag(n)
    else:
        def value(n):
            return sign(n) * torch.pow(10.0, 1.0 + torch.rand(n, generator=g, device=dev))
    n = 1 + int(torch.randint(0, 4, (), generator=g, device=dev).item())
    return _spikes(x, None, n, value, g, dev)


def _draw(rule: InputRule, shape: tuple[int, ...], dtype: torch.dtype, description: str | None,
          profile: str, stress_class: str, env: dict[str, int], g: torch.Generator,
          dev: torch.device, serial: bool = False) -> torch.Tensor:
    """Values of one random tensor input under ``rule`` and ``profile`` (see module doc);
    ``serial``: independent values drawn in one pass with ``g`` (:func:`_iid`)."""
    r = rule.rule

    def randn():
        return _iid(shape, "normal", g, dev, serial=serial)

    def uniform(lo, hi):
        return _iid(shape, "uniform", g, dev, lo, hi, serial=serial)

    if r == "bool_01":
        return torch.randint(0, 2, shape, generator=g, device=dev).bool()
    if r == "int_uniform":
        lo, hi = (-128, 128) if dtype == torch.int8 else (-1024, 1024)
        if dtype == torch.uint8:
            lo, hi = 0, 256
        return torch.randint(lo, hi, shape, generator=g, device=dev, dtype=dtype)
    if r == "role_index":
        hi = env[rule.arg] if rule.arg in env else int(rule.arg)
        return torch.randint(0, max(hi, 1), shape, generator=g, device=dev, dtype=dtype)
    if r == "fp4_randn_quantized":
        # declared shapes of packed fp4 count bytes: draw two values per element
        x = torch.randn(tuple(shape[:-1]) + (shape[-1] * 2,), generator=g, device=dev)
        return _fp4_quantize(x)
    if r == "role_mask" and not dtype.is_floating_point:
        return torch.randint(0, 2, shape, generator=g, device=dev, dtype=dtype)
    if not dtype.is_floating_point:
        raise ValueError(f"rule {r} needs a float input, got {dtype}")

    strict = profile in ("strict",) + STRESS_PROFILES
    if r == "fp8_randn_clamped":
        x = randn().clamp_(-2, 2)
    elif r == "causal_mask_additive":
        says_inf = "-inf" in (description or "").lower()
        fill = -math.inf if strict and says_inf else torch.finfo(dtype).min
        return _causal(shape, dtype, dev, fill)
    elif r == "norm_weight_ones":
        x = uniform(0.5, 1.5) if strict else torch.ones(shape, device=dev)
    elif r == "norm_bias_zeros":
        x = randn().mul_(0.5) if strict else torch.zeros(shape, device=dev)
    elif r in ("binary_mask", "role_mask"):
        x = torch.randint(0, 2, shape, generator=g, device=dev).float()
    elif r in ("rope_cos", "rope_sin"):
        t = randn().clamp(-math.pi, math.pi)
        x = torch.cos(t) if r == "rope_cos" else torch.sin(t)
    elif r in ("positive", "role_positive"):
        x = randn().abs_().add_(0.1)
    elif r == "ssm_a_cumsum":
        x = uniform(-0.1, 0.0).cumsum(dim=-1)
    elif r == "ssm_a_log":
        x = uniform(-5.0, -1.0)
    elif r == "ssm_a":
        x = uniform(-1.0, -0.001)
    elif r == "ssm_gate":
        x = uniform(-5.0, 0.0)
    elif r in ("softmax_rows", "sampling_probs"):
        x = torch.softmax(randn(), dim=-1)
    elif r in ("weight_fan_in", "role_scaled"):
        x = randn().div_(math.sqrt(max(shape[-1], 1)))
    elif r == "role_unit_interval":
        x = uniform(0.0, 1.0)
    elif r == "role_ones":
        x = torch.ones(shape, device=dev)
    elif r == "role_uniform":
        lo, hi = (float(v) for v in rule.arg.split(":"))
        x = uniform(lo, hi)
    elif r == "randn":
        if profile == "stress" and dtype in _STRESS_DTYPES:
            x = _stress_values(stress_class, shape, g, dev)
        elif profile == "stress_sparse" and dtype in _STRESS_DTYPES:
            x = _sparse_values(stress_class, shape, g, dev)
        else:
            x = randn()
    else:  # pragma: no cover - every rule of rules.RULES is handled above
        raise AssertionError(f"unhandled rule {r}")
    return x.to(dtype)


def _random_scalar(dtype: torch.dtype, g: torch.Generator):
    """Upstream: a 0-d draw of the dtype's default distribution, as a Python value."""
    if dtype == torch.bool:
        return bool(torch.randint(0, 2, (), generator=g, device=g.device).item())
    if not dtype.is_floating_point:
        return int(torch.randint(-1024, 1024, (), generator=g, device=g.device).item())
    return float(torch.randn((), generator=g, device=g.device).item())


#: where the value of an input comes from (:attr:`PlannedInput.source`)
SOURCES = ("scalar", "random_scalar", "random", "safetensors", "custom")


@dataclass(frozen=True)
class PlannedInput:
    """What the inputs layer decides about one input of a workload before a value is drawn.

    Attributes:
        name: the input's name in the definition.
        source: one of :data:`SOURCES`: ``scalar`` (the workload's value, :attr:`value`),
            ``random_scalar`` (a Python scalar drawn by its dtype), ``random`` (a tensor drawn
            by :attr:`rule`), ``safetensors`` (a tensor of a blob, :attr:`blob`), ``custom``
            (made by the problem's custom-inputs entrypoint).
        shape: the declared shape with the workload's axes resolved (None: a Python scalar).
        dtype: the declared torch dtype.
        rule: the generation rule of a ``random`` tensor (None for other sources).
        value: the workload's value of a ``scalar`` input.
        blob: the blob file of a ``safetensors`` input, None when it is not on disk.
    """

    name: str
    source: str
    shape: tuple[int, ...] | None
    dtype: torch.dtype
    rule: InputRule | None = None
    value: Any = None
    blob: Path | None = None

    @property
    def missing_blob(self) -> bool:
        """A ``safetensors`` input whose blob is not on disk."""
        return self.source == "safetensors" and self.blob is None


def _classify(problem: Problem, name: str, shape, dtype: torch.dtype) -> InputRule:
    defn = problem.definition
    spec = defn.inputs[name]
    try:
        return classify(name, shape, dtype, spec.description, role=(defn.input_roles or {}).get(name),
                        op_type=defn.op_type)
    except ValueError as e:
        raise SpecError(problem.path, f"input_roles.{name}", str(e)) from None


def plan_inputs(problem: Problem, workload: Workload) -> dict[str, PlannedInput]:
    """What each input of ``workload`` is, in definition order: its source, resolved shape,
    dtype, and the rule of a random tensor (no value is drawn, no blob is read). The one
    place that decides these; :func:`make_inputs` draws from it, and the SOL counter
    (:mod:`solbench.sol.counting`) builds its shape-only and real-tensor inputs from it.

    Raises:
        ValueError: an axis of the workload cannot be resolved.
        SpecError: an unknown role (names the problem and ``input_roles.<name>``).
    """
    defn = problem.definition
    env = defn.resolve_axes(workload.axes)
    out: dict[str, PlannedInput] = {}
    for name, spec in defn.inputs.items():
        src = workload.inputs[name]
        dtype = to_torch(spec.dtype)
        shape = defn.shape_of(spec, env)
        if isinstance(src, CustomInput):
            out[name] = PlannedInput(name, "custom", shape, dtype)
        elif isinstance(src, ScalarInput):
            out[name] = PlannedInput(name, "scalar", shape, dtype, value=src.value)
        elif isinstance(src, SafetensorsInput):
            out[name] = PlannedInput(name, "safetensors", shape, dtype, blob=find_blob(problem, src.path))
        elif shape is None:
            out[name] = PlannedInput(name, "random_scalar", shape, dtype)
        else:
            out[name] = PlannedInput(name, "random", shape, dtype, rule=_classify(problem, name, shape, dtype))
    return out


def input_rules(problem: Problem, workload: Workload) -> dict[str, InputRule | str]:
    """The rule each input of ``workload`` gets, in definition order: an
    :class:`~solbench.inputs.rules.InputRule` for random tensor inputs, else the source kind
    (``"scalar"``, ``"random_scalar"``, ``"safetensors"``, ``"custom"``).

    Raises:
        ValueError: an axis of the workload cannot be resolved.
        SpecError: an unknown role (names the problem and ``input_roles.<name>``).
    """
    return {name: p.rule if p.source == "random" else p.source
            for name, p in plan_inputs(problem, workload).items()}


def load_blob(problem: Problem, workload: Workload, name: str, device: str = "cpu") -> torch.Tensor:
    """The tensor of safetensors input ``name`` of ``workload``, loaded onto ``device``.

    Raises:
        MissingBlobError: the blob is not on disk (names workload, input, path).
        SpecError: the blob has no tensor under the workload's ``tensor_key``.
    """
    src = workload.inputs[name]
    blob = find_blob(problem, src.path)
    if blob is None:
        raise MissingBlobError(
            src.path, f"workload {workload.uuid}.inputs.{name}",
            "safetensors blob not found (looked in the problem directory and "
            "$FLASHINFER_TRACE_DIR); this dataset ships without its blobs",
        )
    from safetensors.torch import load_file

    tensors = load_file(str(blob), device=str(torch.device(device)))
    if src.tensor_key not in tensors:
        raise SpecError(blob, f"tensor_key {src.tensor_key!r}", "key not in the blob")
    return tensors[src.tensor_key]


#: op classes whose stress values replace plain float data inputs of custom workloads too
#: (any real logits are a softmax's valid input, any real rows a normalisation's)
CUSTOM_STRESS_CLASSES = ("softmax", "norm")


def custom_stress_inputs(problem: Problem, workload: Workload) -> list[str]:
    """The inputs of a custom workload that its stress rounds replace: plain float data
    tensors (what would be rule ``randn`` were they random: no mask, weight, index, role or
    norm parameter by name) of a definition whose reference is of a class in
    :data:`CUSTOM_STRESS_CLASSES`. A custom entrypoint's values belong to the problem, but a
    softmax written for its benign draw (``N(0, 3^2)`` logits, no max subtraction) is wrong
    for the op all the same. Empty for other workloads."""
    defn = problem.definition
    oc = op_classes(defn)
    if not workload.is_custom or oc.name not in CUSTOM_STRESS_CLASSES \
            or oc.evidence.get(oc.name, "").split()[-1] in ("log", "log2", "log10", "log1p"):
        # a logarithm alone (a KL divergence of probabilities): its inputs have a domain
        return []
    env = defn.resolve_axes(workload.axes)
    roles = defn.input_roles or {}
    out = []
    for name, spec in defn.inputs.items():
        dtype = to_torch(spec.dtype)
        if spec.shape is None or dtype not in _STRESS_DTYPES or isinstance(workload.inputs.get(name), ScalarInput):
            continue
        try:
            rule = classify(name, defn.shape_of(spec, env), dtype, spec.description, role=roles.get(name),
                            op_type=defn.op_type)
        except ValueError:
            continue
        if rule.rule in STRESS_RULES:
            out.append(name)
    return out


def differing_profiles(problem: Problem, workload: Workload) -> tuple[str, ...]:
    """The profiles other than ``upstream`` whose inputs differ from upstream's for this
    workload (so a round under them tests something): ``"strict"`` when an input has a rule
    of :data:`STRICT_RULES` or is a causal mask described with ``-inf``; ``"stress"`` when
    that holds or an input is a plain float data input (rule ``randn``, fp16/bf16/fp32/fp64);
    ``"stress_sparse"`` when such a data input exists.
    Safetensors workloads give ``()``; custom ones ``("stress", "stress_sparse")`` when
    :func:`custom_stress_inputs` names an input, else ``()``.
    """
    defn = problem.definition
    if workload.is_custom:
        return ("stress", "stress_sparse") if custom_stress_inputs(problem, workload) else ()
    strict = stress = False
    for name, rule in input_rules(problem, workload).items():
        if not isinstance(rule, InputRule):
            continue
        spec = defn.inputs[name]
        if rule.rule in STRICT_RULES or (
                rule.rule == "causal_mask_additive" and "-inf" in (spec.description or "").lower()):
            strict = True
        if rule.rule in STRESS_RULES and to_torch(spec.dtype) in _STRESS_DTYPES:
            stress = True
    return tuple(p for p, on in (("strict", strict), ("stress", stress or strict),
                                 ("stress_sparse", stress)) if on)


def make_inputs(problem: Problem, workload: Workload, seed: int, device: str = "cpu", *,
                profile: str = "upstream",
                substitute: Callable[[PlannedInput], Any] | None = None,
                missing_blobs: str = "error") -> dict[str, Any]:
    """Build the inputs of ``workload`` in definition input order.

    Args:
        problem: the loaded problem. workload: one of its workloads.
        seed: RNG seed; the same seed and profile give the same values on the same device.
        device: "cpu", "cuda[:i]" or "meta" (custom entrypoints only make sense there).
        profile: one of :data:`PROFILES` (module doc).
        substitute: for a consumer that needs no values for some tensors (the SOL counter's
            shape-only inputs and its stand-ins for large floating inputs): called with the
            :class:`PlannedInput` of each tensor this call would draw (a random tensor, and an
            absent blob under ``missing_blobs="draw"``); what it returns other than None is
            taken in place of a draw, and the generator is not advanced for it (the inputs
            drawn after it then take other values than without). None for custom workloads'
            inputs, blobs on disk, and scalars: those are always the problem's.
        missing_blobs: ``"error"`` (the default; the harness): an absent safetensors blob
            raises :class:`~solbench.errors.MissingBlobError`; ``"draw"``: its input is drawn
            as a random input of its declared shape and dtype would be (its rule by
            :func:`~solbench.inputs.rules.classify`), for a consumer such as the SOL counter
            that needs a valid stand-in for a trace's values the dataset does not ship. Those
            draws take a generator of their own (seeded ``seed``, definition order, one serial
            pass each), so their values depend on no random input's rule or substitute (only
            on the absent blobs before them): where the reference's work depends on them (a
            router's logits and bias), the count does not move when another input's rule
            does. An
            integer index or offsets input so drawn (or drawn by upstream's ``int_uniform``)
            is no valid index; :func:`solbench.inputs.structure.synthesize_indices` makes it one.

    Returns:
        name -> tensor (declared shape and dtype) or Python scalar (shape ``None``).

    Raises:
        MissingBlobError: a safetensors blob is not on disk (names workload, input, path).
        SpecError: the custom entrypoint is missing, fails, or returns a wrong shape/dtype.
        ValueError: an unknown profile or ``missing_blobs`` value.
        SpecError: an unknown role, or a role that needs another dtype.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: expected one of {PROFILES}")
    if missing_blobs not in ("error", "draw"):
        raise ValueError(f"missing_blobs {missing_blobs!r}: expected 'error' or 'draw'")
    defn = problem.definition
    env = defn.resolve_axes(workload.axes)
    out: dict[str, Any] = {}
    if workload.is_custom:
        mod = problem.reference_module()
        fn = getattr(mod, defn.custom_inputs_entrypoint or "", None)
        if fn is None:
            raise SpecError(problem.path, "custom_inputs_entrypoint",
                            f"function {defn.custom_inputs_entrypoint!r} not found in reference")
        args = dict(env)
        for k, src in workload.inputs.items():
            if isinstance(src, ScalarInput):
                args[k] = src.value
        with GLOBAL_RNG_LOCK:  # the draws of one seed, none of another thread's between them
            seed_global(seed, device)
            got = fn(args, torch.device(device))
        if not isinstance(got, dict):
            raise SpecError(problem.path, "custom_inputs_entrypoint",
                            f"returned {type(got).__name__}, expected a dict of inputs")
        for name, spec in defn.inputs.items():
            if name not in got:
                raise SpecError(problem.path, f"custom_inputs_entrypoint.{name}",
                                "input not returned by the entrypoint")
            v = got[name]
            if isinstance(v, torch.Tensor):
                shape = defn.shape_of(spec, env)
                if shape is not None and tuple(v.shape) != shape:
                    raise SpecError(problem.path, f"inputs.{name}.shape",
                                    f"entrypoint made shape {tuple(v.shape)}, declared {shape}")
                if v.dtype != to_torch(spec.dtype):
                    raise SpecError(problem.path, f"inputs.{name}.dtype",
                                    f"entrypoint made {v.dtype}, declared {spec.dtype}")
            out[name] = v
        if profile in STRESS_PROFILES:
            # the entrypoint's other inputs stay; its plain data inputs take the stress values
            g = _generator(seed, device)
            cls = op_classes(defn).name
            for name in custom_stress_inputs(problem, workload):
                shape = tuple(out[name].shape)
                x = _stress_values(cls, shape, g, torch.device(device)) if profile == "stress" \
                    else _sparse_values(cls, shape, g, torch.device(device))
                out[name] = x.to(out[name].dtype)
        return out

    g = _generator(seed, device)
    g_blobs = _generator(seed, device)
    dev = torch.device(device)
    plan = plan_inputs(problem, workload)
    stress_class = op_classes(defn).name if profile in STRESS_PROFILES else "generic"
    for name, p in plan.items():
        if p.source == "scalar":
            out[name] = p.value
        elif p.source == "random_scalar":
            out[name] = _random_scalar(p.dtype, g)
        elif p.source == "safetensors" and not (p.missing_blob and missing_blobs == "draw"):
            out[name] = load_blob(problem, workload, name, device)
        elif p.source in ("random", "safetensors"):
            v = substitute(p) if substitute is not None else None
            if v is None:
                drawn = p.source == "random"
                rule = p.rule if drawn else _classify(problem, name, p.shape, p.dtype)
                try:
                    v = _draw(rule, p.shape, p.dtype, defn.inputs[name].description, profile,
                              stress_class, env, g if drawn else g_blobs, dev, serial=not drawn)
                except ValueError as e:
                    raise SpecError(problem.path, f"input_roles.{name}", str(e)) from None
            out[name] = v
        else:  # pragma: no cover - CustomInput handled above
            raise SpecError(problem.path, f"inputs.{name}", "mixed custom inputs")
    return out
