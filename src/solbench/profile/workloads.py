"""The profiler's workloads: seven models in three domains, built offline from configs with
random weights (no hub downloads), each as one callable *step*.

Language: a Llama-style decoder at three widths (``llama-135m``: SmolLM-135M shapes,
``llama-1b``: Llama-3.2-1B shapes, ``llama-8b``: Llama-3.1-8B layer shapes, 8 of its 32
layers at full scale) in modes ``infer`` (= prefill), ``decode`` and ``train``; ``bert-base``.
Vision: ``vit-b16``, ``resnet50``, ``dit-block`` (DiT-XL/2). Recommendation: ``dlrm-kaggle``
(DLRM, Criteo Kaggle tables), ``dlrm-v2`` (MLPerf DLRMv2: DCNv2 interaction, multi-hot) and
``dcnv2`` (DCN-V2 stacked model, Criteo Kaggle tables).

Scales: ``full`` (the published shapes, stated in each config), ``small`` (reduced widths and
layers, same kernels; for quick GPU runs) and ``tiny`` (seconds on a CPU; CI).
Precision: on CUDA, inference runs bf16 weights (fp32 + TF32 for the recommenders, which are
normally run in fp32) and training runs fp32 master weights under bf16 autocast (recommenders:
fp32 + TF32). On CPU everything is fp32 (autocast off).

Library preference: transformers (``LlamaConfig``/``BertConfig``, ``attn_implementation=
"sdpa"``) for Llama and BERT (required: ``pip install solbench[profile]``); timm, then
torchvision, then :mod:`solbench.profile.models` for ViT-B/16 and ResNet-50; plain torch for
the DiT block, DLRM and DCNv2. The implementation used is recorded in the config.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import SolbenchError
from . import models

MODES = ("infer", "decode", "train")
SCALES = ("tiny", "small", "full")


class ProfileError(SolbenchError):
    """A workload, mode, scale or device that cannot be profiled (names which and why)."""


@dataclass
class BuiltWorkload:
    """A ready-to-run workload step.

    Attributes:
        name, mode, scale, device: what was built.
        step: runs one step (forward for ``infer``/``decode``; forward + backward + optimizer
            step for ``train``); returns nothing useful. Does not synchronize.
        config: shapes and sizes stated (batch, sequence, widths, parameters, implementation).
        precision: flags that decide which vendor kernels run (applied by the profiler around
            the run, recorded in the report): ``param_dtype``, ``autocast_dtype``,
            ``tf32_matmul``, ``tf32_cudnn``, ``cudnn_benchmark``, ``channels_last``.
    """

    name: str
    mode: str
    scale: str
    device: str
    step: Callable[[], Any]
    config: dict[str, Any]
    precision: dict[str, Any] = field(default_factory=dict)
    model: nn.Module | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    domain: str
    description: str
    modes: tuple[str, ...]
    builder: Callable[..., BuiltWorkload]

    def shapes(self) -> dict[str, str]:
        return dict(_SHAPE_NOTES.get(self.name, {}))


def _n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def _autocast(device: str, dtype: torch.dtype | None):
    if dtype is None or device == "cpu":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=dtype)


def _on_cuda(device: str) -> bool:
    return device.startswith("cuda")


def _optimizer(model: nn.Module, kind: str, device: str) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if kind == "adamw":
        kw: dict[str, Any] = {"fused": True} if _on_cuda(device) else {"foreach": True}
        return torch.optim.AdamW(params, lr=1e-4, **kw)
    if kind == "sgd_momentum":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True)
    raise ValueError(kind)


def _train_step(model: nn.Module, loss_fn: Callable[[], torch.Tensor], opt, device: str,
                amp: torch.dtype | None) -> Callable[[], None]:
    """zero_grad -> forward (under autocast when ``amp``) -> backward -> optimizer step(s).
    ``opt``: one optimizer, or a list of (optimizer, annotation or None); an annotation wraps
    that optimizer's step in a ``record_function`` range (e.g. ``solbench::sparse_optimizer``)."""
    model.train()
    opts = [(opt, None)] if isinstance(opt, torch.optim.Optimizer) else list(opt)

    def step() -> None:
        for o, _ in opts:
            o.zero_grad(set_to_none=True)
        with _autocast(device, amp):
            loss = loss_fn()
        loss.backward()
        for o, tag in opts:
            if tag:
                with torch.profiler.record_function(tag):
                    o.step()
            else:
                o.step()

    return step


def _infer_step(model: nn.Module, fwd: Callable[[], Any]) -> Callable[[], None]:
    model.eval()

    def step() -> None:
        with torch.inference_mode():
            fwd()

    return step


def _precision(device: str, mode: str, *, low: torch.dtype | None, tf32: bool = False,
               cudnn_benchmark: bool = False, channels_last: bool = False) -> dict[str, Any]:
    cuda = _on_cuda(device)
    infer_dtype = low if (cuda and low is not None) else torch.float32
    return {
        "param_dtype": str(infer_dtype if mode != "train" else torch.float32).replace("torch.", ""),
        "autocast_dtype": (str(low).replace("torch.", "") if (cuda and low is not None and mode == "train")
                           else None),
        "tf32_matmul": bool(cuda and tf32),
        "tf32_cudnn": bool(cuda and tf32),
        "cudnn_benchmark": bool(cuda and cudnn_benchmark),
        "channels_last": bool(channels_last),
    }


def _want_dtype(precision: dict[str, Any]) -> torch.dtype:
    return getattr(torch, precision["param_dtype"])


# ================================================================ Llama
_LLAMA = {
    # name: full config (HF LlamaConfig kwargs), full-scale layer count, published source
    "llama-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
                       rope_theta=10000.0, max_position_embeddings=2048,
                       _source="HuggingFaceTB/SmolLM-135M config.json"),
    "llama-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                     num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
                     rope_theta=500000.0, max_position_embeddings=4096,
                     _source="meta-llama/Llama-3.2-1B config.json"),
    "llama-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=8,
                     num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False,
                     rope_theta=500000.0, max_position_embeddings=4096,
                     _source="meta-llama/Llama-3.1-8B config.json (8 of its 32 layers)"),
}
_LLAMA_TINY = {
    "llama-135m": dict(hidden_size=48, intermediate_size=128, num_attention_heads=3, num_key_value_heads=1),
    "llama-1b": dict(hidden_size=64, intermediate_size=256, num_attention_heads=4, num_key_value_heads=1),
    "llama-8b": dict(hidden_size=128, intermediate_size=448, num_attention_heads=4, num_key_value_heads=1),
}
#: (batch, sequence) for prefill/train, (batch, context) for decode, per scale
_LLAMA_SIZES = {"tiny": ((2, 32), (2, 32)), "small": ((2, 256), (8, 256)), "full": ((4, 1024), (16, 1024))}


def _require_transformers(name: str):
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        raise ProfileError(f"workload {name!r} needs transformers: pip install 'solbench[profile]' ({e})") from None
    return transformers


def llama_config_kwargs(name: str, scale: str) -> dict[str, Any]:
    """HF ``LlamaConfig`` kwargs for a Llama workload at a scale (``_source`` names where the
    full-scale numbers come from)."""
    cfg = dict(_LLAMA[name])
    if scale == "small":
        cfg.update(hidden_size=cfg["hidden_size"] // 4, intermediate_size=cfg["intermediate_size"] // 4,
                   num_hidden_layers=2, vocab_size=8192)
    elif scale == "tiny":
        cfg.update(_LLAMA_TINY[name], num_hidden_layers=2, vocab_size=512, max_position_embeddings=256)
    return cfg


def _kv_kwarg(model: nn.Module) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def build_llama(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    transformers = _require_transformers(name)
    cfg = llama_config_kwargs(name, scale)
    source = cfg.pop("_source")
    prec = _precision(device, mode, low=torch.bfloat16)
    conf = transformers.LlamaConfig(attn_implementation="sdpa", **cfg)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(conf)
    model.to(device=device, dtype=_want_dtype(prec))  # no-op when the device context was honoured
    (b, s), (db, ctx) = _LLAMA_SIZES[scale]
    g = torch.Generator(device="cpu").manual_seed(0)
    config = {"implementation": f"transformers {transformers.__version__} LlamaForCausalLM (sdpa)",
              "config": {k: v for k, v in cfg.items()}, "config_source": source,
              "parameters": _n_params(model)}
    if mode == "decode":
        ids = torch.randint(0, conf.vocab_size, (db, ctx), generator=g).to(device)
        tok = torch.randint(0, conf.vocab_size, (db, 1), generator=g).to(device)
        kv = _kv_kwarg(model)
        model.eval()
        with torch.inference_mode():
            out = model(ids, use_cache=True)
        cache = getattr(out, "cache", None) if hasattr(out, "cache") else None
        cache = cache if cache is not None else out.past_key_values

        def step() -> None:
            with torch.inference_mode():
                extra = cache.get_seq_length() - ctx
                if extra > 0:  # keep the context fixed: every step decodes token ctx+1
                    cache.crop(-extra)  # negative = drop that many tokens (all transformers 4.4x-5.x)
                model(tok, use_cache=True, **{kv: cache})

        config.update(batch=db, context=ctx, new_tokens_per_step=1, cache="transformers DynamicCache")
        return BuiltWorkload(name, mode, scale, device, step, config, prec, model)
    ids = torch.randint(0, conf.vocab_size, (b, s), generator=g).to(device)
    config.update(batch=b, sequence=s, tokens_per_step=b * s)
    if mode == "infer":
        # prefill as generate() runs it: logits for the last position only, when supported
        kw = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
        config.update(logits="last position only (logits_to_keep=1)" if kw else "every position")
        return BuiltWorkload(name, mode, scale, device, _infer_step(model, lambda: model(ids, use_cache=False, **kw)),
                             config, prec, model)
    opt = _optimizer(model, "adamw", device)
    config.update(optimizer="AdamW (fused on CUDA)", loss="causal LM cross-entropy")
    step = _train_step(model, lambda: model(ids, labels=ids, use_cache=False).loss, opt, device, torch.bfloat16)
    return BuiltWorkload(name, mode, scale, device, step, config, prec, model)


# ================================================================ BERT
_BERT = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
             intermediate_size=3072, max_position_embeddings=512)
_BERT_SIZES = {"tiny": (2, 16), "small": (8, 128), "full": (32, 128)}


def build_bert(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    transformers = _require_transformers(name)
    cfg = dict(_BERT)
    if scale == "small":
        cfg.update(num_hidden_layers=2)
    elif scale == "tiny":
        cfg.update(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=256, max_position_embeddings=64)
    prec = _precision(device, mode, low=torch.bfloat16)
    conf = transformers.BertConfig(attn_implementation="sdpa", **cfg)
    cls = transformers.BertModel if mode == "infer" else transformers.BertForMaskedLM
    with torch.device(device):
        model = cls(conf)
    model.to(device=device, dtype=_want_dtype(prec))
    b, s = _BERT_SIZES[scale]
    ids = torch.randint(0, conf.vocab_size, (b, s), generator=torch.Generator().manual_seed(0)).to(device)
    config = {"implementation": f"transformers {transformers.__version__} {cls.__name__} (sdpa)",
              "config": cfg, "config_source": "google-bert/bert-base-uncased config.json",
              "parameters": _n_params(model), "batch": b, "sequence": s}
    if mode == "infer":
        return BuiltWorkload(name, mode, scale, device, _infer_step(model, lambda: model(ids)), config, prec, model)
    opt = _optimizer(model, "adamw", device)
    config.update(optimizer="AdamW (fused on CUDA)", loss="masked-LM cross-entropy over every token")
    step = _train_step(model, lambda: model(ids, labels=ids).loss, opt, device, torch.bfloat16)
    return BuiltWorkload(name, mode, scale, device, step, config, prec, model)


# ================================================================ vision
_VIT = {"tiny": dict(image=32, patch=8, dim=64, depth=2, heads=4, classes=10, batch=2),
        "small": dict(image=224, patch=16, dim=768, depth=2, heads=12, classes=1000, batch=16),
        "full": dict(image=224, patch=16, dim=768, depth=12, heads=12, classes=1000, batch=64)}


def _vit_model(c: dict[str, Any]) -> tuple[nn.Module, str]:
    try:
        import timm

        m = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=c["image"],
                              patch_size=c["patch"], embed_dim=c["dim"], depth=c["depth"],
                              num_heads=c["heads"], num_classes=c["classes"])
        return m, f"timm {timm.__version__} vit_base_patch16_224"
    except ImportError:
        pass
    try:
        import torchvision
        from torchvision.models.vision_transformer import VisionTransformer

        m = VisionTransformer(image_size=c["image"], patch_size=c["patch"], num_layers=c["depth"],
                              num_heads=c["heads"], hidden_dim=c["dim"], mlp_dim=4 * c["dim"],
                              num_classes=c["classes"])
        return m, f"torchvision {torchvision.__version__} VisionTransformer (vit_b_16 shapes)"
    except ImportError:
        pass
    m = models.VisionTransformer(image=c["image"], patch=c["patch"], dim=c["dim"], depth=c["depth"],
                                 heads=c["heads"], num_classes=c["classes"])
    return m, "plain torch (solbench.profile.models.VisionTransformer)"


_RESNET = {"tiny": dict(image=32, width=16, layers=(1, 1, 1, 1), classes=10, batch=2),
           "small": dict(image=224, width=64, layers=(1, 1, 1, 1), classes=1000, batch=32),
           "full": dict(image=224, width=64, layers=(3, 4, 6, 3), classes=1000, batch=128)}


def _resnet_model(c: dict[str, Any]) -> tuple[nn.Module, str]:
    if c["width"] == 64:
        try:
            import torchvision
            from torchvision.models.resnet import Bottleneck, ResNet

            return (ResNet(Bottleneck, list(c["layers"]), num_classes=c["classes"]),
                    f"torchvision {torchvision.__version__} ResNet(Bottleneck, {list(c['layers'])})")
        except ImportError:
            pass
    m = models.ResNet50(num_classes=c["classes"], width=c["width"], layers=c["layers"])
    return m, "plain torch (solbench.profile.models.ResNet50)"


def _classifier_workload(name: str, mode: str, scale: str, device: str, model: nn.Module, impl: str,
                         c: dict[str, Any], prec: dict[str, Any], opt_kind: str, extra: dict) -> BuiltWorkload:
    cl = prec["channels_last"]
    model.to(device=device, dtype=_want_dtype(prec))
    if cl:
        model.to(memory_format=torch.channels_last)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(c["batch"], 3, c["image"], c["image"], generator=g).to(device, _want_dtype(prec))
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, c["classes"], (c["batch"],), generator=g).to(device)
    config = {"implementation": impl, "config": {k: v for k, v in c.items()}, "parameters": _n_params(model),
              "batch": c["batch"], "image": c["image"], **extra}
    if mode == "infer":
        return BuiltWorkload(name, mode, scale, device, _infer_step(model, lambda: model(x)), config, prec, model)
    opt = _optimizer(model, opt_kind, device)
    config.update(optimizer=opt_kind, loss="cross-entropy over random labels")
    step = _train_step(model, lambda: F.cross_entropy(model(x), y), opt, device,
                       torch.bfloat16 if _on_cuda(device) else None)
    return BuiltWorkload(name, mode, scale, device, step, config, prec, model)


def build_vit(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    c = _VIT[scale]
    with torch.device(device):
        model, impl = _vit_model(c)
    prec = _precision(device, mode, low=torch.bfloat16)
    return _classifier_workload(name, mode, scale, device, model, impl, c, prec, "adamw",
                                {"tokens": (c["image"] // c["patch"]) ** 2 + 1})


def build_resnet(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    c = _RESNET[scale]
    with torch.device(device):
        model, impl = _resnet_model(c)
    prec = _precision(device, mode, low=torch.bfloat16, cudnn_benchmark=True, channels_last=_on_cuda(device))
    return _classifier_workload(name, mode, scale, device, model, impl, c, prec, "sgd_momentum", {})


_DIT = {"tiny": dict(dim=64, heads=4, tokens=16, depth=1, batch=2),
        "small": dict(dim=1152, heads=16, tokens=256, depth=1, batch=8),
        "full": dict(dim=1152, heads=16, tokens=256, depth=1, batch=64)}


def build_dit(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    c = _DIT[scale]
    prec = _precision(device, mode, low=torch.bfloat16)
    with torch.device(device):
        model = models.DiTStack(depth=c["depth"], dim=c["dim"], heads=c["heads"])
    model.to(device=device, dtype=_want_dtype(prec))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(c["batch"], c["tokens"], c["dim"], generator=g).to(device, _want_dtype(prec))
    cond = torch.randn(c["batch"], c["dim"], generator=g).to(device, _want_dtype(prec))
    target = torch.randn_like(x)
    config = {"implementation": "plain torch (solbench.profile.models.DiTBlock, adaLN-Zero)",
              "config": c, "config_source": "DiT-XL/2 (Peebles & Xie 2023): 256 tokens = 32x32 latent, patch 2",
              "parameters": _n_params(model), "batch": c["batch"], "tokens": c["tokens"]}
    if mode == "infer":
        return BuiltWorkload(name, mode, scale, device, _infer_step(model, lambda: model(x, cond)), config, prec, model)
    opt = _optimizer(model, "adamw", device)
    config.update(optimizer="AdamW (fused on CUDA)", loss="MSE to a random target (noise prediction)")
    step = _train_step(model, lambda: F.mse_loss(model(x, cond).float(), target.float()), opt, device,
                       torch.bfloat16 if _on_cuda(device) else None)
    return BuiltWorkload(name, mode, scale, device, step, config, prec, model)


# ================================================================ recommenders
#: Criteo Kaggle (Display Advertising Challenge) per-feature cardinalities, as counted by the
#: DLRM reference data loader (facebookresearch/dlrm, kaggle day_fea_count)
CRITEO_KAGGLE_ROWS = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
                      27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
#: MLPerf DLRMv2 (Criteo 1TB, multi-hot) table sizes and pooling factors (mlcommons/training
#: recommendation_v2 README)
MLPERF_V2_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
                  2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
MLPERF_V2_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)

_REC = {
    "dlrm-kaggle": {
        "full": dict(row_cap=None, batch=4096, dim=16, bottom=(13, 512, 256, 64, 16), top=(512, 256, 1)),
        "small": dict(row_cap=100_000, batch=1024, dim=16, bottom=(13, 512, 256, 64, 16), top=(512, 256, 1)),
        "tiny": dict(row_cap=1000, batch=32, dim=16, bottom=(13, 32, 16), top=(32, 1)),
    },
    "dlrm-v2": {
        "full": dict(row_cap=4_000_000, batch=8192, dim=128, bottom=(13, 512, 256, 128),
                     top=(1024, 1024, 512, 256, 1), cross_layers=3, cross_rank=512),
        "small": dict(row_cap=100_000, batch=1024, dim=128, bottom=(13, 512, 256, 128),
                      top=(1024, 1024, 512, 256, 1), cross_layers=3, cross_rank=512),
        "tiny": dict(row_cap=1000, batch=32, dim=16, bottom=(13, 32, 16), top=(64, 1), cross_layers=2,
                     cross_rank=16),
    },
    "dcnv2": {
        "full": dict(row_cap=None, batch=4096, dim=16, cross_layers=3, cross_rank=128, deep=(1024, 1024, 512)),
        "small": dict(row_cap=100_000, batch=1024, dim=16, cross_layers=3, cross_rank=128, deep=(1024, 1024, 512)),
        "tiny": dict(row_cap=1000, batch=32, dim=8, cross_layers=2, cross_rank=16, deep=(32, 16)),
    },
}


def _sparse_inputs(rows, pooling, batch: int, device: str, g: torch.Generator):
    """Uniform random indices in [0, rows) with fixed pooling per table; offsets [B] int64."""
    idx, offs = [], []
    for r, p in zip(rows, pooling):
        idx.append(torch.randint(0, r, (batch * p,), generator=g).to(device))
        offs.append(torch.arange(0, batch * p, p, dtype=torch.int64).to(device))
    return idx, offs


def build_recommender(name: str, mode: str, scale: str, device: str) -> BuiltWorkload:
    c = _REC[name][scale]
    base = CRITEO_KAGGLE_ROWS if name != "dlrm-v2" else MLPERF_V2_ROWS
    rows = [min(r, c["row_cap"]) if c["row_cap"] else r for r in base]
    pooling = MLPERF_V2_POOLING if name == "dlrm-v2" else (1,) * len(rows)
    sparse = mode == "train"
    with torch.device(device):
        if name == "dlrm-kaggle":
            model = models.DLRM(rows, c["dim"], c["bottom"], c["top"], interaction="dot", sparse=sparse)
            impl = "plain torch DLRM (dot interaction; facebookresearch/dlrm)"
        elif name == "dlrm-v2":
            model = models.DLRM(rows, c["dim"], c["bottom"], c["top"], interaction="dcn",
                                cross_layers=c["cross_layers"], cross_rank=c["cross_rank"], sparse=sparse)
            impl = "plain torch DLRM (DCNv2 low-rank cross interaction; MLPerf DLRMv2 reference)"
        else:
            model = models.DCNv2(rows, c["dim"], 13, c["cross_layers"], c["cross_rank"], c["deep"], sparse=sparse)
            impl = "plain torch DCN-V2 stacked (low-rank cross + deep)"
    prec = _precision(device, mode, low=None, tf32=True)
    g = torch.Generator().manual_seed(0)
    b = c["batch"]
    dense = torch.randn(b, 13, generator=g).to(device)
    idx, offs = _sparse_inputs(rows, pooling, b, device, g)
    label = torch.randint(0, 2, (b,), generator=g).float().to(device)
    config = {"implementation": impl, "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in c.items()},
              "tables": len(rows), "rows": rows, "pooling": list(pooling), "batch": b,
              "embedding_rows_total": sum(rows), "parameters": _n_params(model),
              "index_distribution": "uniform",
              "config_source": ("Criteo Kaggle cardinalities (DLRM reference)" if name != "dlrm-v2" else
                                "MLPerf DLRMv2 (Criteo 1TB multi-hot) tables, rows capped at "
                                f"{c['row_cap']:,} to fit one GPU")}
    fwd = lambda: model(dense, idx, offs)  # noqa: E731
    if mode == "infer":
        return BuiltWorkload(name, mode, scale, device, _infer_step(model, fwd), config, prec, model)
    emb_params = list(model.emb.parameters())
    emb_ids = {id(p) for p in emb_params}
    dense_params = [p for p in model.parameters() if id(p) not in emb_ids]
    opts = [(torch.optim.SGD(emb_params, lr=0.01), "solbench::sparse_optimizer"),
            (torch.optim.SGD(dense_params, lr=0.01), None)]
    config.update(optimizer="SGD: embeddings (sparse gradients, step annotated solbench::sparse_optimizer) "
                            "and dense parameters", loss="BCE-with-logits over random labels")
    step = _train_step(model, lambda: F.binary_cross_entropy_with_logits(fwd(), label), opts, device, None)
    return BuiltWorkload(name, mode, scale, device, step, config, prec, model)


# ================================================================ registry
_SHAPE_NOTES = {
    "llama-135m": {"full": "batch 4 x seq 1024 (prefill/train); decode batch 16, context 1024"},
    "llama-1b": {"full": "batch 4 x seq 1024 (prefill/train); decode batch 16, context 1024"},
    "llama-8b": {"full": "8 layers of Llama-3.1-8B; batch 4 x seq 1024; decode batch 16, context 1024"},
    "bert-base": {"full": "batch 32 x seq 128"},
    "vit-b16": {"full": "batch 64 x 224x224 (197 tokens)"},
    "resnet50": {"full": "batch 128 x 224x224, channels_last"},
    "dit-block": {"full": "one DiT-XL/2 block, batch 64 x 256 tokens x 1152"},
    "dlrm-kaggle": {"full": "batch 4096, 26 tables (Criteo Kaggle rows), D 16, one-hot"},
    "dlrm-v2": {"full": "batch 8192, 26 tables (MLPerf DLRMv2 rows capped at 4M), D 128, multi-hot"},
    "dcnv2": {"full": "batch 4096, 26 tables (Criteo Kaggle rows), D 16, 3 low-rank (128) cross layers"},
}

WORKLOADS: dict[str, WorkloadSpec] = {}


def _reg(name: str, domain: str, description: str, modes: tuple[str, ...], builder) -> None:
    WORKLOADS[name] = WorkloadSpec(name, domain, description, modes, builder)


_reg("llama-135m", "language", "Llama-style decoder, SmolLM-135M shapes", ("infer", "decode", "train"), build_llama)
_reg("llama-1b", "language", "Llama-style decoder, Llama-3.2-1B shapes", ("infer", "decode", "train"), build_llama)
_reg("llama-8b", "language", "Llama-style decoder, Llama-3.1-8B layer shapes", ("infer", "decode", "train"),
     build_llama)
_reg("bert-base", "language", "BERT-base encoder", ("infer", "train"), build_bert)
_reg("vit-b16", "vision", "ViT-B/16 classifier", ("infer", "train"), build_vit)
_reg("resnet50", "vision", "ResNet-50 classifier", ("infer", "train"), build_resnet)
_reg("dit-block", "vision", "DiT-XL/2 transformer block (adaLN-Zero)", ("infer", "train"), build_dit)
_reg("dlrm-kaggle", "recommendation", "DLRM, Criteo-Kaggle-like", ("infer", "train"), build_recommender)
_reg("dlrm-v2", "recommendation", "DLRM, MLPerf-DLRMv2-like", ("infer", "train"), build_recommender)
_reg("dcnv2", "recommendation", "DCN-V2 (stacked cross + deep)", ("infer", "train"), build_recommender)

#: the Llama scale sweep, smallest first
LLAMA_SWEEP: tuple[str, ...] = ("llama-135m", "llama-1b", "llama-8b")


def build_workload(name: str, mode: str = "infer", scale: str = "tiny", device: str = "cpu") -> BuiltWorkload:
    """Build a workload's step.

    Args:
        name: a key of :data:`WORKLOADS`.
        mode: ``infer`` (``prefill`` accepted for Llama), ``decode`` (Llama only) or ``train``.
        scale: ``tiny`` | ``small`` | ``full``.
        device: ``cpu`` or ``cuda[:i]``.
    Raises:
        ProfileError: unknown name, mode, scale or an unavailable device / library.
    """
    if name not in WORKLOADS:
        raise ProfileError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    spec = WORKLOADS[name]
    mode = "infer" if mode == "prefill" else mode
    if mode not in spec.modes:
        raise ProfileError(f"workload {name!r} has no mode {mode!r}; modes: {', '.join(spec.modes)}")
    if scale not in SCALES:
        raise ProfileError(f"unknown scale {scale!r}; scales: {', '.join(SCALES)}")
    if _on_cuda(device) and not torch.cuda.is_available():
        raise ProfileError(f"device {device!r} requested but CUDA is not available")
    if not (device == "cpu" or _on_cuda(device)):
        raise ProfileError(f"device must be cpu or cuda[:i], got {device!r}")
    torch.manual_seed(0)
    return spec.builder(name, mode, scale, device)


def param_count_meta(name: str, scale: str = "full") -> int:
    """Parameter count of a transformers Llama workload built on the meta device (no memory);
    used by the sweep figure's x axis and by tests against published sizes."""
    transformers = _require_transformers(name)
    cfg = llama_config_kwargs(name, scale)
    cfg.pop("_source")
    with torch.device("meta"):
        m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    return _n_params(m)


__all__ = ["WORKLOADS", "LLAMA_SWEEP", "MODES", "SCALES", "BuiltWorkload", "WorkloadSpec", "ProfileError",
           "build_workload", "param_count_meta", "llama_config_kwargs"]
