"""Where the model to extract comes from: ``hf:ARCH``, a bundled profiler workload, or
``module:factory``.

Each source gives a module in eval mode and the example inputs of one forward call. A source
that can build its inputs at any size (``hf:``) gives two *probe* calls at different small
sizes, from which the extractor learns which dimensions vary with batch and sequence; the
others give one call and the batch size it was made at.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from ..errors import SolbenchError


class ExtractError(SolbenchError):
    """A model that cannot be built or captured (names which and why)."""


#: the two probe sizes (batch, sequence) of sources that can size their inputs: small enough
#: for the CPU, distinct from each other and from one another's products so that a dimension's
#: values at the two probes say which axis it follows (batch, sequence or tokens = batch*seq)
PROBES = ((2, 5), (3, 7))


@dataclass
class ModelSource:
    """A model ready to be captured.

    Attributes:
        label: the MODEL argument as given (written into every problem's provenance).
        module: the model, eval mode, on the CPU.
        probe: ``probe(batch, seq) -> (args, kwargs)`` for sources that size their inputs, else None.
        fixed: ``(args, kwargs)`` of the one example call when ``probe`` is None.
        fixed_batch: batch size of ``fixed`` (dimension 0 of activations equal to it is the batch axis).
        has_seq: whether the inputs have a sequence dimension that the user may vary.
        real: the model's real sizes per axis name (``batch_size``, ``seq_len``).
        names: integer config values by name, used to name constant axes (``hidden_size``).
        hf_id: the Hugging Face architecture name, if any.
    """

    label: str
    module: nn.Module
    probe: Callable[[int, int], tuple[tuple, dict]] | None = None
    fixed: tuple[tuple, dict] | None = None
    fixed_batch: int | None = None
    has_seq: bool = False
    real: dict[str, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    hf_id: str | None = None


def parse_config(text: str | None) -> dict[str, Any]:
    """``k=v,k=v`` -> dict, values read as int, float, bool, None or str.

    Raises:
        ExtractError: an item without ``=``.
    """
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ExtractError(f"--config: {item!r} is not key=value")
        k, v = (s.strip() for s in item.split("=", 1))
        out[k] = _value(v)
    return out


def _value(v: str) -> Any:
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def _unique_int_names(cfg: dict[str, Any]) -> dict[int, str]:
    """Value -> config key for integer config values held by exactly one key (> 1)."""
    seen: dict[int, list[str]] = {}
    for k, v in cfg.items():
        if isinstance(v, int) and not isinstance(v, bool) and v > 1 and not k.startswith("_") \
                and not k.endswith("_id") and "token" not in k:
            seen.setdefault(v, []).append(k)
    return {v: ks[0] for v, ks in seen.items() if len(ks) == 1}


def _hf_source(arch: str, config: dict[str, Any], batch: int, seq: int, dtype: torch.dtype) -> ModelSource:
    try:
        import transformers
    except ImportError:
        raise ExtractError("hf: models need transformers (bash scripts/install.sh profile)") from None
    config = dict(config)
    # the eager experts loop walks the experts hit by the routing (data-dependent control
    # flow, which export cannot capture); batched_mm is the same math as one gather + bmm
    config.setdefault("experts_implementation", "batched_mm")
    config.setdefault("attn_implementation", "sdpa")
    try:
        cfg = transformers.AutoConfig.for_model(arch, **config)
    except (ValueError, KeyError) as e:
        raise ExtractError(f"hf:{arch}: {str(e).splitlines()[0]}") from None
    torch.manual_seed(0)
    try:
        # .to(dtype) rather than from_config(dtype=...): the keyword was torch_dtype before 4.56
        model = transformers.AutoModel.from_config(cfg).to(dtype)
    except Exception as e:  # noqa: BLE001 - any construction failure is the user's config
        raise ExtractError(f"hf:{arch}: cannot build the model from its config: {str(e).splitlines()[0]}") from None
    model.eval()
    vision = hasattr(cfg, "image_size") and hasattr(cfg, "num_channels") and not hasattr(cfg, "vocab_size")
    accepts = inspect.signature(model.forward).parameters
    vocab = getattr(cfg, "vocab_size", None)

    def probe(b: int, s: int) -> tuple[tuple, dict]:
        g = torch.Generator().manual_seed(1000 * b + s)
        if vision:
            size = cfg.image_size if isinstance(cfg.image_size, int) else cfg.image_size[0]
            x = torch.randn(b, cfg.num_channels, size, size, generator=g).to(dtype)
            return (), {"pixel_values": x}
        if vocab is None:
            raise ExtractError(f"hf:{arch}: neither a vision config (image_size) nor a vocab_size")
        kw: dict[str, Any] = {"input_ids": torch.randint(0, vocab, (b, s), generator=g)}
        if "use_cache" in accepts:
            kw["use_cache"] = False
        return (), kw

    names = _unique_int_names(cfg.to_dict())
    real = {"batch_size": batch} if vision else {"batch_size": batch, "seq_len": seq}
    return ModelSource(f"hf:{arch}", model, probe=probe, has_seq=not vision, real=real, names=names,
                       hf_id=arch)


def _profile_source(name: str, scale: str) -> ModelSource:
    from ..profile.workloads import WORKLOADS, ProfileError, build_workload

    if name not in WORKLOADS:
        raise ExtractError(f"unknown model {name!r}: not hf:ARCH, module:factory or a profile workload "
                           f"({', '.join(WORKLOADS)})")
    try:
        built = build_workload(name, "infer", scale, "cpu")
    except ProfileError as e:
        raise ExtractError(str(e)) from None
    model = built.model
    seen: list[tuple[tuple, dict]] = []

    def grab(mod, args, kwargs):
        seen.append((args, kwargs))

    h = model.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        built.step()  # the workload's own call: its own inputs at its own sizes
    finally:
        h.remove()
    if not seen:
        raise ExtractError(f"profile workload {name!r}: its step never called the model")
    cfg = built.config
    batch = int(cfg.get("batch") or 1)
    names = _unique_int_names({k: v for k, v in (cfg.get("config") or {}).items() if isinstance(v, int)})
    return ModelSource(f"{name} ({scale})", model.eval(), fixed=seen[0], fixed_batch=batch,
                       real={"batch_size": batch}, names=names)


def _factory_source(spec: str) -> ModelSource:
    modname, _, fn = spec.partition(":")
    try:
        mod = importlib.import_module(modname)
    except ImportError as e:
        raise ExtractError(f"{spec}: cannot import {modname!r}: {e}") from None
    factory = getattr(mod, fn, None)
    if not callable(factory):
        raise ExtractError(f"{spec}: {modname} has no callable {fn!r}")
    got = factory()
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], nn.Module)):
        raise ExtractError(f"{spec}: the factory must return (module, inputs), inputs a tuple or a dict")
    module, inputs = got
    args, kwargs = ((), dict(inputs)) if isinstance(inputs, dict) else (tuple(inputs), {})
    first = next((t for t in list(args) + list(kwargs.values()) if isinstance(t, torch.Tensor) and t.dim()), None)
    batch = int(first.shape[0]) if first is not None else None
    return ModelSource(spec, module.eval(), fixed=(args, kwargs), fixed_batch=batch,
                       real={"batch_size": batch} if batch else {})


def load_source(model: str, config: dict[str, Any] | None = None, *, batch: int = 1, seq: int = 128,
                dtype: torch.dtype = torch.float32, scale: str = "tiny") -> ModelSource:
    """Build the model named by ``model``.

    Args:
        model: ``hf:ARCH`` (a transformers architecture, random weights, nothing downloaded),
            a profiler workload name (``solbench profile --list``), or ``module:factory``.
        config: config overrides for ``hf:`` models.
        batch, seq: the model's real sizes (the workloads' first line).
        dtype: parameter dtype for ``hf:`` models.
        scale: the profiler workload's scale (tiny, small, full).

    Raises:
        ExtractError: an unknown model, a missing library, a config the architecture rejects.
    """
    if model.startswith("hf:"):
        return _hf_source(model[3:], config or {}, batch, seq, dtype)
    if config:
        raise ExtractError("--config applies to hf: models only")
    if ":" in model:
        return _factory_source(model)
    return _profile_source(model, scale)
