"""Kernel classification: which library runs a kernel, and is it addressable?

A kernel is put in one class by ordered rules, first match wins (docs/profiling.md,
"Kernel classes"; the names were checked against traces recorded on an H200, torch 2.11):

1. ``copy_engine``     ``Memcpy ...``, ``Memset ...``
2. ``communication``   NCCL
3. ``generated``       ``triton_*`` (inductor) and user Triton kernels
4. ``framework_native`` ATen / CUB / thrust kernels (guarded before the vendor substrings, so an
                        ATen kernel whose template arguments mention ``gemm`` stays ATen); one
                        sub-class each (:data:`NATIVE_SUBCLASSES`)
5. ``attention``       flash / fmha / cuDNN SDPA / memory-efficient attention
6. ``convolution``     cuDNN / xmma fprop, dgrad, wgrad, implicit convolve, winograd
7. ``gemm``            nvjet, xmma gemm, gemm / gemv, CUTLASS, cuBLAS, split-K reduce
8. ``vendor_other``    other vendor library kernels (cuDNN aux, cuFFT, cuRAND, cuSPARSE)
9. fallback on the launching aten op: mm / addmm / bmm / linear -> ``gemm``, conv ->
   ``convolution``, sdpa / flash -> ``attention``; otherwise ``unknown``.

Addressable (what a custom kernel written against a PyTorch problem could replace):
``strict`` = framework_native; ``loose`` = framework_native + vendor_other.

On CPU there are no device kernels: the same classes are assigned from the aten op alone
(:func:`classify_op`), e.g. ``aten::addmm`` -> gemm (oneDNN/MKL), everything else that is an
aten op -> framework_native with a sub-class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

#: every class, in the order reports list them
CLASSES: tuple[str, ...] = (
    "gemm", "attention", "convolution", "framework_native", "generated",
    "vendor_other", "communication", "copy_engine", "unknown",
)
#: framework-native sub-classes (profiling.md rule 4)
NATIVE_SUBCLASSES: tuple[str, ...] = (
    "elementwise", "reduce", "norm", "softmax", "embedding", "index", "sort/scan", "cat/copy",
    "optimizer", "rng/dropout", "pool/upsample",
)
STRICT_ADDRESSABLE: frozenset[str] = frozenset({"framework_native"})
LOOSE_ADDRESSABLE: frozenset[str] = frozenset({"framework_native", "vendor_other"})


@dataclass(frozen=True)
class Classification:
    """The class of one kernel: ``cls`` (one of :data:`CLASSES`), ``subclass`` (a
    :data:`NATIVE_SUBCLASSES` entry for framework_native, else ""), and ``rule``: the name of
    the rule that decided it (``name:<rule>`` or ``op:<rule>``) so a report can show why."""

    cls: str
    subclass: str
    rule: str

    @property
    def strict(self) -> bool:
        return self.cls in STRICT_ADDRESSABLE

    @property
    def loose(self) -> bool:
        return self.cls in LOOSE_ADDRESSABLE


def _rx(pattern: str) -> re.Pattern:
    return re.compile(pattern)


# ---- rules on the kernel name (ordered, first match wins) -------------------------------
#: (class, rule name, regex searched in the kernel name)
NAME_RULES: tuple[tuple[str, str, re.Pattern], ...] = (
    ("copy_engine", "memcpy", _rx(r"^\s*(Memcpy|Memset)\b|^\[?(memcpy|memset)")),
    ("communication", "nccl", _rx(r"(?i)nccl")),
    ("generated", "triton", _rx(r"^\s*(void\s+)?triton_|^\s*(void\s+)?triton\w*_kernel|_triton_")),
    # ATen / CUB / thrust, recognised by namespace at the head of the kernel's own name or by
    # ATen kernel names that are not namespaced in some builds
    ("framework_native", "aten",
     _rx(r"^\s*(void\s+)?(at::|at_cuda_detail::|c10::|cub::|thrust::|\(anonymous namespace\)::"
         r"(softmax|cunn|reduce|elementwise|index|indexing|batch_norm|layer_norm)|"
         r"(CUB_\d+_\d+_\d+_SM_\d+::)|"
         r"(cunn_|softmax_warp_|CatArrayBatchedCopy|EmbeddingBag_|compute_grad_weight|"
         r"sum_and_scatter|krn_partial|indexSelect|indexFuncLargeIndex|vectorized_elementwise_kernel|"
         r"unrolled_elementwise_kernel|elementwise_kernel|reduce_kernel|multi_tensor_apply_kernel|"
         r"Device(Radix|Segmented|Scan|Select|Reduce|Histogram|Merge)\w*Kernel|"
         r"fused_dropout_kernel|distribution_elementwise|RowwiseMomentsCUDAKernel|"
         r"LayerNormForwardCUDAKernel|GammaBetaBackward|triu_tril_kernel))")),
    ("attention", "attention",
     _rx(r"(?i)flash|fmha|sdpa|attention|mha_|pytorch_flash|memeff|mem_eff|_attn_|"
         r"xformers")),
    ("convolution", "convolution",
     _rx(r"(?i)fprop|dgrad|wgrad|implicit_convolve|implicit_gemm|winograd|convolve|conv2d|"
         r"conv_|_conv|precomputed_convolve|fft2d_r2c|cudnn_convolution")),
    ("gemm", "gemm",
     _rx(r"(?i)nvjet|xmma_gemm|gemm|gemv|cutlass|cublas|splitkreduce|splitk_reduce|"
         r"\b(s|h|d|c|z)?(ampere|volta|turing|sm\d\d)_\w*(sgemm|hgemm|bgemm|gemm)|"
         r"dot_kernel|reduce_1Block_kernel|\bsm\d\d_xmma_")),
    ("vendor_other", "vendor",
     _rx(r"(?i)cudnn|curand|cufft|cusparse|cusolver|\bfft|regular_fft|vector_fft|csrmm|"
         r"nchwToNhwc|nhwcToNchw|bn_fw|bn_bw|generate_seed_pseudo|xmma|cusparselt")),
)

# ---- fallback rules on the launching aten op ----------------------------------------------
#: (class, rule name, regex matched against the aten op's bare name, e.g. "addmm")
OP_VENDOR_RULES: tuple[tuple[str, str, re.Pattern], ...] = (
    ("attention", "sdpa",
     _rx(r"^(_?scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*|"
         r"_cudnn_attention\w*|flash_attn\w*|multi_head_attention\w*|_native_multi_head_attention|"
         r"_transformer_encoder_layer_fwd)$")),
    ("convolution", "conv",
     _rx(r"^(conv\w*|_conv\w*|cudnn_convolution\w*|mkldnn_convolution\w*|convolution\w*|"
         r"_convolution\w*|miopen_convolution\w*|_slow_conv\w*|slow_conv\w*|thnn_conv\w*)$")),
    ("gemm", "matmul",
     _rx(r"^(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|mv|addmv|dot|vdot|_addmm_activation|"
         r"_scaled_mm|_int_mm|einsum|tensordot|inner|outer|ger|chain_matmul|linalg_\w*|"
         r"mkldnn_linear|_mkldnn_linear)$")),
)

# ---- framework-native sub-classes --------------------------------------------------------
#: specific kernel-name patterns (checked first)
SUBCLASS_NAME_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("optimizer", _rx(r"(?i)multi_tensor_apply|adam|adagrad|_sgd|sgd_|amp_update_scale|"
                      r"non_finite_check|\blamb\b|\blion\b")),
    ("rng/dropout", _rx(r"(?i)dropout|philox|distribution_|bernoulli|random_|curand|normal_kernel|"
                        r"uniform_kernel")),
    ("embedding", _rx(r"(?i)embedding|compute_grad_weight|sum_and_scatter|krn_partial|"
                      r"partials_per_segment|partial_segment|renorm_kernel")),
    ("softmax", _rx(r"(?i)softmax")),
    ("norm", _rx(r"(?i)layer_norm|layernorm|rms_?norm|RowwiseMoments|batch_norm|GammaBeta|"
                 r"group_norm|welford|bn_|instance_norm|ComputeInternalGradients|\bnorm_kernel")),
    ("sort/scan", _rx(r"(?i)radix|scan|sort|unique|DeviceSelect|DeviceSegmented|DeviceHistogram|"
                      r"DeviceMerge|coalesce|segment_reduce|cumsum|cumprod|topk|bitonic")),
    ("index", _rx(r"(?i)index|gather|scatter|take_|put_|masked|nonzero|triu_tril|where_kernel")),
    ("cat/copy", _rx(r"(?i)CatArrayBatchedCopy|copy_kernel|direct_copy|CopyFunctor|"
                     r"copy_device_to_device|transpose|permute|\bcat_")),
    ("pool/upsample", _rx(r"(?i)pool|upsample|interp|im2col|col2im")),
)
#: aten op patterns (on the bare op name), checked after the name rules
SUBCLASS_OP_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("optimizer", _rx(r"^(_fused_adamw?_?|_fused_sgd_?|_fused_adagrad_?|_foreach_\w+|"
                      r"_amp_\w+|_fused_\w+)$")),
    ("rng/dropout", _rx(r"^(dropout|native_dropout\w*|feature_dropout|bernoulli_?|rand\w*|"
                        r"normal_|uniform_|random_|multinomial|_fused_dropout|alpha_dropout)$")),
    ("embedding", _rx(r"^(embedding\w*|_embedding_bag\w*|embedding_bag\w*)$")),
    ("softmax", _rx(r"^(_?softmax\w*|_?log_softmax\w*|softmax|log_softmax)$")),
    ("norm", _rx(r"^(layer_norm|native_layer_norm\w*|batch_norm\w*|_batch_norm\w*|"
                 r"native_batch_norm\w*|cudnn_batch_norm\w*|group_norm|native_group_norm\w*|"
                 r"rms_norm|_fused_rms_norm\w*|instance_norm|_native_batch_norm_legit\w*)$")),
    ("sort/scan", _rx(r"^(sort|argsort|unique\w*|_unique\w*|cumsum_?|cumprod_?|topk|_coalesce|"
                      r"coalesce|segment_reduce|_segment_reduce\w*|msort|searchsorted|bincount)$")),
    ("index", _rx(r"^(index\w*|_index\w*|gather\w*|scatter\w*|take\w*|masked\w*|nonzero\w*|"
                  r"index_select\w*|index_add_?|index_copy_?|index_put_?|_unsafe_index\w*|"
                  r"triu\w*|tril\w*|where|embedding_dense_backward)$")),
    ("cat/copy", _rx(r"^(cat|_cat|stack|copy_|clone|contiguous|to|_to_copy|_copy_from\w*|"
                     r"repeat\w*|constant_pad_nd|pad|expand|transpose|permute|t|narrow_copy|"
                     r"slice_scatter|select_scatter|split_with_sizes_copy|zero_|fill_|"
                     r"_unsafe_view|view|reshape|flatten|unsqueeze|squeeze|empty\w*|zeros\w*|"
                     r"ones\w*|full\w*|new_\w+|resize_|as_strided\w*|detach\w*|unbind|split\w*|"
                     r"chunk|slice|select|alias|lift_fresh|_reshape_alias|set_)$")),
    ("pool/upsample", _rx(r"^(\w*pool\w*|upsample\w*|_upsample\w*|interpolate|grid_sampler\w*|"
                          r"im2col|col2im|pixel_shuffle)$")),
    ("reduce", _rx(r"^(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|var\w*|std\w*|prod|"
                   r"argmax|argmin|all|any|logsumexp|mse_loss\w*|nll_loss\w*|cross_entropy\w*|"
                   r"binary_cross_entropy\w*|smooth_l1_loss\w*|l1_loss|huber_loss\w*|count_nonzero|"
                   r"_local_scalar_dense|item|sum_to_size)$")),
)
_STRONG_NAME_SUBCLASSES = frozenset({"optimizer", "rng/dropout", "embedding", "softmax", "norm"})
_EMBEDDING_OP = _rx(r"^(embedding\w*|_embedding_bag\w*|embedding_bag\w*)$")
_GENERIC_REDUCE = _rx(r"(?i)reduce_kernel|Reduce\w*Kernel|reduce_1Block|ReduceOp")

#: CPU op names that are profiler bookkeeping, not work: never counted
IGNORED_CPU_OPS = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::view", "aten::as_strided",
    "aten::_reshape_alias", "aten::resize_", "aten::detach", "aten::detach_", "aten::alias",
    "aten::lift_fresh", "aten::result_type", "aten::is_nonzero", "aten::_has_compatible_shallow_copy_type",
})


def bare_op(op: str | None) -> str:
    """``"aten::addmm"`` -> ``"addmm"``; ``"aten::add_.Tensor"`` -> ``"add_"``; None -> ""."""
    if not op:
        return ""
    name = op.split("::", 1)[1] if "::" in op else op
    return name.split(".", 1)[0]


def native_subclass(kernel: str | None, ops: Sequence[str] = (), context: Iterable[str] = ()) -> str:
    """Sub-class of a framework-native kernel.

    Args:
        kernel: the device kernel name (None on CPU).
        ops: the aten ops that launched it, innermost first (e.g. ``["aten::addmm",
            "aten::linear"]``).
        context: names of every enclosing event (record_function annotations included); an
            ``Optimizer.step`` or ``Optimizer.zero_grad`` annotation makes it ``optimizer``.
    Returns one of :data:`NATIVE_SUBCLASSES`.
    """
    if any(c.startswith("Optimizer.") for c in context):
        return "optimizer"
    name_rules = SUBCLASS_NAME_RULES if kernel else ()
    # 1. specific kernel names (the functor in a template decides for generic kernels)
    for sub, rx in name_rules:
        if sub in _STRONG_NAME_SUBCLASSES and rx.search(kernel):
            return sub
    # 2. an embedding op anywhere in the launching chain (aten::embedding runs index_select)
    if any(_EMBEDDING_OP.match(bare_op(op)) for op in ops):
        return "embedding"
    # 3. the remaining name patterns, then the aten op (innermost first)
    for sub, rx in name_rules:
        if sub not in _STRONG_NAME_SUBCLASSES and rx.search(kernel):
            return sub
    for op in ops:
        b = bare_op(op)
        for sub, rx in SUBCLASS_OP_RULES:
            if rx.match(b):
                return sub
    if kernel and _GENERIC_REDUCE.search(kernel):
        return "reduce"
    return "elementwise"


def _op_fallback(ops: Sequence[str]) -> tuple[str, str] | None:
    for op in ops:
        b = bare_op(op)
        for cls, rule, rx in OP_VENDOR_RULES:
            if rx.match(b):
                return cls, rule
    return None


def classify_kernel(kernel: str, ops: Sequence[str] = (), context: Iterable[str] = ()) -> Classification:
    """Classify one device kernel by its name, falling back to its launching aten op.

    Args:
        kernel: the kernel name as the profiler reports it (Kineto/CUPTI, demangled).
        ops: launching aten ops, innermost first (may be empty).
        context: enclosing event names (for the optimizer sub-class).
    Returns a :class:`Classification`; ``cls == "unknown"`` when neither the name nor the op
    decides.
    """
    ctx = tuple(context)
    for cls, rule, rx in NAME_RULES:
        if rx.search(kernel):
            sub = native_subclass(kernel, ops, ctx) if cls == "framework_native" else ""
            return Classification(cls, sub, f"name:{rule}")
    fb = _op_fallback(ops)
    if fb is not None:
        return Classification(fb[0], "", f"op:{fb[1]}")
    return Classification("unknown", "", "none")


def classify_op(op: str, parents: Sequence[str] = (), context: Iterable[str] = ()) -> Classification:
    """Classify CPU work by its aten op (there are no device kernels on CPU).

    Args:
        op: the aten op that did the work (e.g. ``"aten::addmm"``).
        parents: enclosing aten ops, innermost first (``aten::linear`` above ``aten::addmm``).
        context: enclosing event names.
    Vendor classes come from :data:`OP_VENDOR_RULES` on the op or its parents (a CPU
    ``aten::mm`` runs oneDNN/MKL, as ``aten::mm`` on CUDA runs cuBLAS); every other aten op is
    framework_native with a sub-class; a non-aten op is ``unknown``.
    """
    ops = (op, *parents)
    fb = _op_fallback(ops)
    if fb is not None:
        return Classification(fb[0], "", f"op:{fb[1]}")
    if op.startswith(("aten::", "prims::")):
        return Classification("framework_native", native_subclass(None, ops, context), "op:aten")
    if op.startswith("c10d::") or "nccl" in op.lower():
        return Classification("communication", "", "op:c10d")
    return Classification("unknown", "", "none")
