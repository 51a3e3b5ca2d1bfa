"""NumPy float64 oracle for every op: what kernels and engines are checked against.

Inputs are array-likes of any float dtype (ml_dtypes bfloat16 / fp8 included); everything is
computed and returned in float64. One op family per file; each file's docstring states the cuDNN
semantics exactly (and says where cuDNN leaves a choice that ncudnn had to make).

graph ops:  pointwise, reduction, matmul, conv, norm (+ norm_graph), softmax, resample, attention,
            rng, quantize (block scale), paged (paged cache load)
legacy ops: legacy (blend, OpTensor, activation, bias, dropout), lrn, spatial_tf, ctc, rnn, mha
one node:   ops.run_op / run_node / run_graph (by IR op name, ports and attributes; for `verify`)

Where cuDNN's documentation leaves a choice open, ncudnn fixed one here (kernels must match):
* pointwise RELU_BWD takes the outer slope at x == lower / upper clip (no gradient at x == 0);
  RELU_FWD with NOT_PROPAGATE_NAN maps NaN to the lower clip; MIN / MAX ignore a NaN operand.
* resample: MAXPOOL index = row-major offset inside the window, first maximum on ties;
  AVGPOOL_EXCLUDE_PADDING counts in-range taps only (also under EDGE_VAL_PAD); NEAREST / BILINEAR
  sample at the window centre o*s - pre + (w-1)/2.
* rng: element i of Y uses Philox4x32-10 stream word offset + i (cuRAND's curand_init(seed, 0,
  offset) order); BERNOULLI is u <= p; SDPA / dropout keep masks are BERNOULLI(1 - p).
* attention: rows with no visible key or past seq_len_q give o = 0 (cuDNN leaves them unspecified).
* legacy OpTensor NOT is 1 - a; CTC uses ZERO_OOB gradients; block-scale all-zero blocks take the
  smallest E8M0 scale 2^-127; paged-cache rows past the sequence length are 0.
"""
from .attention import alibi_slopes, sdpa_backward, sdpa_forward
from .conv import conv_dgrad, conv_fprop, conv_output_shape, conv_wgrad
from .ctc import ctc_loss
from .legacy import (
    activation_backward, activation_forward, add_tensor, blend, conv_backward_bias,
    conv_bias_activation_forward, dropout_backward, dropout_forward, op_tensor, scale_tensor)
from .lrn import lrn_backward, lrn_forward
from .matmul import matmul
from .mha import mha_backward, mha_forward
from .norm import (
    batchnorm_backward, batchnorm_forward_training, batchnorm_inference, bn_bwd_weights,
    bn_finalize, genstats, groupnorm_backward, groupnorm_forward, instancenorm_backward,
    instancenorm_forward, layernorm_backward, layernorm_forward, rmsnorm_backward,
    rmsnorm_forward)
from .norm_graph import norm_backward, norm_forward
from .ops import SUPPORTED_OPS, run_graph, run_node, run_op
from .paged import paged_cache_load
from .pointwise import POINTWISE_ARITY, pointwise, pointwise_mode
from .quantize import block_scale_dequantize, block_scale_quantize
from .reduction import reduction, reduction_indices, reduction_mode
from .resample import resample_backward, resample_forward, resample_mode, resample_output_shape
from .rng import philox4x32_10, philox_uniform, philox_words, rng_generate
from .rnn import rnn_backward, rnn_forward, rnn_gate_count
from .softmax import log_softmax, softmax, softmax_backward
from .spatial_tf import (
    spatial_tf_grid_backward, spatial_tf_grid_forward, spatial_tf_sampler_backward,
    spatial_tf_sampler_forward)

__all__ = [
    "alibi_slopes", "sdpa_backward", "sdpa_forward",
    "conv_dgrad", "conv_fprop", "conv_output_shape", "conv_wgrad",
    "ctc_loss",
    "activation_backward", "activation_forward", "add_tensor", "blend", "conv_backward_bias",
    "conv_bias_activation_forward", "dropout_backward", "dropout_forward", "op_tensor",
    "scale_tensor",
    "lrn_backward", "lrn_forward",
    "matmul",
    "mha_backward", "mha_forward",
    "batchnorm_backward", "batchnorm_forward_training", "batchnorm_inference", "bn_bwd_weights",
    "bn_finalize", "genstats", "groupnorm_backward", "groupnorm_forward",
    "instancenorm_backward", "instancenorm_forward", "layernorm_backward", "layernorm_forward",
    "rmsnorm_backward", "rmsnorm_forward",
    "norm_backward", "norm_forward",
    "SUPPORTED_OPS", "run_graph", "run_node", "run_op",
    "paged_cache_load",
    "POINTWISE_ARITY", "pointwise", "pointwise_mode",
    "block_scale_dequantize", "block_scale_quantize",
    "reduction", "reduction_indices", "reduction_mode",
    "resample_backward", "resample_forward", "resample_mode", "resample_output_shape",
    "philox4x32_10", "philox_uniform", "philox_words", "rng_generate",
    "rnn_backward", "rnn_forward", "rnn_gate_count",
    "log_softmax", "softmax", "softmax_backward",
    "spatial_tf_grid_backward", "spatial_tf_grid_forward", "spatial_tf_sampler_backward",
    "spatial_tf_sampler_forward",
]
