"""Per-aten-op work tables: CUDA-core FLOPs and special-function (SFU) ops per element.

Tensor-core work (matmul, conv, attention) is counted with ``torch.utils.flop_counter``'s
formulas (FLOP = 2 per MAC) in :mod:`solbench.sol.counting`; this module covers everything
else. Each entry is ``(cuda_flops_per_elem, sfu_ops_per_elem, basis)`` where ``basis`` is
``"out"`` (per output element) or ``"in"`` (per element of the first tensor input).

The per-element figures are the arithmetic any implementation must do (a minimal sequence of
FP adds/multiplies and transcendental evaluations), not what a particular kernel does.
Sources: the op's mathematical definition (e.g. softmax = max, subtract, exp, sum, divide
= 4 FLOP + 1 exp per element); SFU = exp/exp2/log/log2/rsqrt/sqrt/sin/cos/tanh/erf, the
functions the CUDA multi-function unit evaluates (CUDA C++ Programming Guide, arithmetic
instruction throughput).
"""

from __future__ import annotations

#: ops that move or reinterpret data and do no arithmetic (bytes still counted unfused)
VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "slice", "select", "as_strided", "alias", "detach", "unbind", "split",
    "split_with_sizes", "chunk", "narrow", "view_as_real", "view_as_complex", "unfold",
    "diagonal", "expand_as", "movedim", "lift_fresh", "_reshape_alias", "squeeze_copy",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_same_size", "_to_copy_meta", "dim", "size", "stride", "numel", "is_nonzero",
    "_assert_async", "_assert_scalar", "_functional_assert_async", "set_", "resize_",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "record_stream",
    "device", "layout", "dtype", "is_contiguous", "is_strides_like_format", "is_non_overlapping_and_dense",
}

#: data movement / creation / indexing ops: no FLOPs, bytes counted unfused
MOVE_OPS = {
    "clone", "copy", "_to_copy", "contiguous", "cat", "stack", "index", "index_select",
    "gather", "scatter", "index_put", "_index_put_impl", "masked_select", "take", "roll",
    "flip", "repeat", "repeat_interleave", "tile", "pad", "constant_pad_nd", "reflection_pad1d",
    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill",
    "zero", "arange", "linspace", "scalar_tensor", "tril", "triu", "nonzero", "where_self_idx",
    "embedding", "masked_fill", "masked_scatter", "slice_scatter", "select_scatter",
    "diagonal_scatter", "as_strided_scatter", "split_copy", "unsqueeze_copy", "view_copy",
    "permute_copy", "t_copy", "transpose_copy", "expand_copy", "_unsafe_index", "im2col",
    "col2im", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "randn", "rand",
    "randint", "randperm", "normal", "uniform", "bernoulli", "random", "exponential",
    "native_dropout", "lift_fresh_copy", "unique_dim", "_unique2", "bincount", "one_hot",
    "searchsorted", "bucketize", "tensor_split", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d", "_upsample_nearest_exact2d", "alias_copy", "histc", "count_nonzero",
    "index_fill", "masked_fill_", "new_tensor", "resolve_conj", "resolve_neg", "view_as",
    "_efficientzerotensor", "detach_copy", "item", "_pin_memory", "logical_not", "bitwise_not",
    "sort", "argsort", "topk", "kthvalue", "sign", "signbit", "isnan", "isinf", "isfinite",
    "floor", "ceil", "round", "trunc", "frac",
}

E = {}


def _add(names, cuda, sfu=0.0, basis="out"):
    for n in names.split():
        E[n] = (float(cuda), float(sfu), basis)


# binary / unary arithmetic: 1 FLOP per output element
_add("add sub rsub mul div neg abs maximum minimum clamp clamp_min clamp_max relu "
     "threshold hardtanh leaky_relu fmod remainder lerp reciprocal square where eq ne lt le "
     "gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
     "bitwise_left_shift bitwise_right_shift __and__ __or__ __xor__ __lshift__ __rshift__ "
     "floor_divide fmax fmin copysign hardsigmoid hardswish relu6 elu_backward "
     "threshold_backward hardtanh_backward isclose heaviside nan_to_num xlogy", 1)
_add("addcmul addcdiv", 2)
_add("pow", 1)  # integer powers on the FMA pipe; float exponents add exp+log below (see counting)
_add("exp exp2 log log2 log10 rsqrt sqrt sin cos tan tanh erf erfc erfinv", 0, 1)
_add("expm1 log1p", 1, 1)
_add("sigmoid", 2, 1)          # 1 / (1 + exp(-x))
_add("silu", 3, 1)             # x * sigmoid(x)
_add("gelu", 4, 1)             # 0.5 x (1 + erf(x/sqrt2)) or the tanh form
_add("mish softplus", 4, 2)    # log1p(exp(x)) (+ tanh for mish)
_add("elu selu celu", 3, 1)
_add("logit", 2, 1)
_add("sigmoid_backward", 3)
_add("tanh_backward", 3)
_add("gelu_backward", 8, 2)
_add("silu_backward", 5, 1)
# reductions: per input element
_add("sum mean amax amin max min prod argmax argmin any all logical_any norm_reduce nansum", 1, 0, "in")
_add("cumsum cumprod logcumsumexp", 1, 0, "in")
_add("var std var_mean std_mean", 3, 0, "in")
_add("linalg_vector_norm norm", 2, 0, "in")
_add("logsumexp", 3, 1, "in")
_add("_softmax softmax", 4, 1, "in")
_add("_log_softmax log_softmax", 4, 1, "in")
_add("_softmax_backward_data", 3, 0, "in")
_add("_log_softmax_backward_data", 3, 1, "in")
_add("native_layer_norm layer_norm", 7, 0, "in")       # mean, var (3), normalise (2), affine (2)
_add("native_layer_norm_backward", 12, 0, "in")
_add("native_group_norm group_norm", 7, 0, "in")
_add("native_group_norm_backward", 12, 0, "in")
_add("native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training "
     "batch_norm _batch_norm_with_update _batch_norm_no_update", 7, 0, "in")
_add("native_batch_norm_backward", 12, 0, "in")
_add("_fused_rms_norm rms_norm", 5, 0, "in")           # square, sum, scale, weight (+ rsqrt per row)
_add("_fused_rms_norm_backward", 10, 0, "in")
_add("mse_loss l1_loss smooth_l1_loss huber_loss", 3, 0, "in")
_add("binary_cross_entropy binary_cross_entropy_with_logits", 5, 2, "in")
_add("nll_loss_forward nll_loss2d_forward", 1, 0, "out")
_add("avg_pool1d avg_pool2d avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d "
     "adaptive_avg_pool1d max_pool2d_with_indices max_pool3d_with_indices max_pool1d "
     "max_pool2d", 1, 0, "in")
_add("avg_pool2d_backward _adaptive_avg_pool2d_backward max_pool2d_with_indices_backward", 1, 0, "in")
_add("upsample_bilinear2d upsample_linear1d _upsample_bilinear2d_aa upsample_bicubic2d", 8)
_add("grid_sampler_2d", 12)
_add("embedding_bag _embedding_bag _embedding_bag_forward_only", 0)  # see counting: per gathered element
_add("index_add index_reduce scatter_add scatter_reduce index_put_accumulate", 1, 0, "in")
_add("embedding_dense_backward", 1, 0, "in")
_add("dot vdot mv addmv outer ger addr", 0)  # handled as matmul-like in counting
_add("cross_entropy_loss", 5, 1, "in")
_add("polar angle atan atan2 asin acos sinh cosh asinh acosh atanh", 2, 1)
_add("rrelu_with_noise prelu _prelu_kernel", 2)
_add("dist cdist _cdist_forward _euclidean_dist", 3, 0, "in")
_add("glu", 4, 1)
_add("_weight_norm_interface", 3, 1, "in")

ELEMENTWISE = E
