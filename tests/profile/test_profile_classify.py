"""Kernel classification rules on hand-labelled kernel names.

The names are ones seen on our test H200 (torch 2.11; listed in docs/profiling.md)
and standard ATen / cuBLAS / cuDNN / CUB / NCCL / Triton kernel names; each label is what the
kernel is (which library wrote it), decided by hand, not by running the rules.
"""

from __future__ import annotations

import pytest

from solbench.profile.classify import (CLASSES, NATIVE_SUBCLASSES, bare_op, classify_kernel, classify_op,
                                       native_subclass)

# (kernel name, launching ops innermost first, expected class, expected sub-class)
LABELLED = [
    # cuBLAS / cuBLASLt GEMMs (H200 names from profiling.md)
    ("nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NTN", ["aten::mm"], "gemm", ""),
    ("nvjet_sm90_hsh_128x256_64x4_1x2_h_bz_coopA_TNT", ["aten::addmm", "aten::linear"], "gemm", ""),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(cutlass_80_simt_sgemm_128x64_8x5_nn_align1::Params)",
     ["aten::mm"], "gemm", ""),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     ["aten::mm"], "gemm", ""),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(...)",
     ["aten::addmm"], "gemm", ""),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(...)",
     ["aten::addmv"], "gemm", ""),
    # attention
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0",
     ["aten::_cudnn_attention_forward"], "attention", ""),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(Flash_fwd_params)",
     ["aten::_flash_attention_forward"], "attention", ""),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     ["aten::_efficient_attention_forward"], "attention", ""),
    # convolution (cuDNN implicit GEMM: "gemm" in the name must not make it a GEMM)
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn",
     ["aten::cudnn_convolution"], "convolution", ""),
    ("sm80_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nchw_tilesize64x64x64_stage5_warpsize2x2x1_g1_tensor16x8x16_kernel_cudnn",
     ["aten::convolution_backward"], "convolution", ""),
    ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(...)",
     ["aten::cudnn_convolution"], "convolution", ""),
    # ATen (framework-native) with their sub-class
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     ["aten::add"], "framework_native", "elementwise"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)",
     ["aten::mean"], "framework_native", "reduce"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 2, 128, 1>(...)",
     ["aten::cat"], "framework_native", "cat/copy"),
    ("void at::native::(anonymous namespace)::EmbeddingBag_updateOutputKernel_sum_mean<float, long>(long const*, long const*, float const*, float*, long*, long, long, long, long, long, float const*, long, long*, long)",
     ["aten::_embedding_bag", "aten::embedding_bag"], "framework_native", "embedding"),
    ("void at::native::(anonymous namespace)::compute_grad_weight_bags<float, long>(...)",
     ["aten::_embedding_bag_dense_backward"], "framework_native", "embedding"),
    ("void at::native::(anonymous namespace)::sum_and_scatter<float, long>(...)",
     ["aten::_embedding_bag_dense_backward"], "framework_native", "embedding"),
    ("void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)",
     ["aten::index_select", "aten::embedding"], "framework_native", "embedding"),
    ("void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<long, long, unsigned long long>::Policy900, true, long, long, unsigned long long, int, int, at_cuda_detail::cub::detail::identity_decomposer_t>(...)",
     ["aten::sort"], "framework_native", "sort/scan"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
     ["aten::_softmax"], "framework_native", "softmax"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 8, false, false>(...)",
     ["aten::_softmax"], "framework_native", "softmax"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(...)",
     ["aten::native_layer_norm"], "framework_native", "norm"),
    ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>(...)",
     ["aten::_fused_adamw_"], "framework_native", "optimizer"),
    ("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>(...)",
     ["aten::native_dropout"], "framework_native", "rng/dropout"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16, float>(...)",
     ["aten::max_pool2d_with_indices"], "framework_native", "pool/upsample"),
    ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<...> >(long, ...)",
     ["aten::index"], "framework_native", "index"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(...)",
     ["aten::copy_", "aten::_to_copy", "aten::to"], "framework_native", "cat/copy"),
    # ATen's depthwise convolution is ATen's own kernel: addressable, not vendor
    ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<1, float, unsigned int>(...)",
     ["aten::_conv_depthwise2d"], "framework_native", "elementwise"),
    # copy engine, communication, generated
    ("Memcpy HtoD (Pageable -> Device)", [], "copy_engine", ""),
    ("Memset (Device)", ["aten::zero_"], "copy_engine", ""),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ["c10d::allreduce_"], "communication", ""),
    ("triton_poi_fused_add_mul_0", [], "generated", ""),
    ("triton_red_fused__to_copy_mean_pow_1", [], "generated", ""),
    # other vendor (cuDNN aux, cuRAND, cuFFT)
    ("void cudnn::bn_fw_tr_1C11_singleread_nhwc<__nv_bfloat16, 512, true, 1, 2, 0>(...)", ["aten::cudnn_batch_norm"],
     "vendor_other", ""),
    ("void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)2>(...)", ["aten::cudnn_convolution"],
     "vendor_other", ""),
    ("void vector_fft<64u, 8u, 8u, (padding_t)0, (twiddle_t)0, (loadstore_modifier_t)2, (layout_t)1, unsigned int, float>(kernel_arguments_t<unsigned int>)",
     ["aten::_fft_r2c"], "vendor_other", ""),
    # rule 9: unknown names fall back to the launching op
    ("some_vendor_kernel_we_have_never_seen", ["aten::addmm", "aten::linear"], "gemm", ""),
    ("some_vendor_kernel_we_have_never_seen", ["aten::_convolution"], "convolution", ""),
    ("some_vendor_kernel_we_have_never_seen", ["aten::scaled_dot_product_attention"], "attention", ""),
    ("some_vendor_kernel_we_have_never_seen", ["aten::add"], "unknown", ""),
]


@pytest.mark.parametrize("kernel,ops,cls,sub", LABELLED, ids=[f"{i}-{x[2]}" for i, x in enumerate(LABELLED)])
def test_labelled_kernel_names(kernel, ops, cls, sub):
    c = classify_kernel(kernel, ops)
    assert (c.cls, c.subclass) == (cls, sub), c.rule
    assert c.cls in CLASSES
    assert (c.subclass in NATIVE_SUBCLASSES) == (c.cls == "framework_native")


def test_addressable_flags():
    native = classify_kernel("void at::native::reduce_kernel<512>(...)", ["aten::sum"])
    aux = classify_kernel("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>(...)", [])
    gemm = classify_kernel("nvjet_sm90_tst_256x128", [])
    assert (native.strict, native.loose) == (True, True)
    assert (aux.strict, aux.loose) == (False, True)
    assert (gemm.strict, gemm.loose) == (False, False)


def test_optimizer_context_overrides_kernel_name():
    # an elementwise add inside Optimizer.step is optimizer work
    k = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(...)"
    assert classify_kernel(k, ["aten::add_"], ["aten::add_", "Optimizer.step#SGD.step"]).subclass == "optimizer"
    assert classify_kernel(k, ["aten::add_"], ["aten::add_"]).subclass == "elementwise"


def test_ordering_first_match_wins():
    # a Triton kernel whose name mentions gemm is generated, not vendor GEMM
    assert classify_kernel("triton_tem_fused_mm_0_gemm", ["aten::mm"]).cls == "generated"
    # a memset launched by a GEMM op is copy engine
    assert classify_kernel("Memset (Device)", ["aten::mm"]).cls == "copy_engine"
    # cuDNN SDPA carries 'fprop' (a convolution word) but attention comes first
    assert classify_kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma", []).cls == "attention"


@pytest.mark.parametrize("op,parents,cls,sub", [
    ("aten::addmm", ["aten::linear"], "gemm", ""),
    ("aten::mm", [], "gemm", ""),
    ("aten::bmm", [], "gemm", ""),
    ("aten::mkldnn_convolution", ["aten::_convolution", "aten::conv2d"], "convolution", ""),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ["aten::scaled_dot_product_attention"], "attention", ""),
    ("aten::_embedding_bag", ["aten::embedding_bag"], "framework_native", "embedding"),
    ("aten::index_select", ["aten::embedding"], "framework_native", "embedding"),
    ("aten::native_layer_norm", ["aten::layer_norm"], "framework_native", "norm"),
    ("aten::_softmax", ["aten::softmax"], "framework_native", "softmax"),
    ("aten::cat", [], "framework_native", "cat/copy"),
    ("aten::copy_", ["aten::_to_copy", "aten::to"], "framework_native", "cat/copy"),
    ("aten::sum", [], "framework_native", "reduce"),
    ("aten::gelu", [], "framework_native", "elementwise"),
    ("aten::_coalesce", [], "framework_native", "sort/scan"),
    ("aten::max_pool2d_with_indices", ["aten::max_pool2d"], "framework_native", "pool/upsample"),
    ("aten::native_dropout", ["aten::dropout"], "framework_native", "rng/dropout"),
    ("my_custom::op", [], "unknown", ""),
])
def test_cpu_ops(op, parents, cls, sub):
    c = classify_op(op, parents)
    assert (c.cls, c.subclass) == (cls, sub)


def test_cpu_optimizer_context():
    c = classify_op("aten::_foreach_mul_", [], ["Optimizer.step#AdamW.step"])
    assert (c.cls, c.subclass) == ("framework_native", "optimizer")


def test_bare_op():
    assert bare_op("aten::add_.Tensor") == "add_"
    assert bare_op("aten::addmm") == "addmm"
    assert bare_op(None) == ""
    assert native_subclass(None, ["aten::cumsum"]) == "sort/scan"
