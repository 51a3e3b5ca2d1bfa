"""NumPy float64 oracle for every op: what kernels and engines are checked against.

Inputs are array-likes of any float dtype (ml_dtypes bfloat16 included); everything is computed and
returned in float64. Each file holds one op family; its docstring states the cuDNN semantics.
"""
from .reduction import reduction, reduction_mode  # noqa: F401
from .conv import conv_dgrad, conv_fprop, conv_output_shape, conv_wgrad  # noqa: F401
from .matmul import matmul  # noqa: F401
from .norm import (  # noqa: F401
    batchnorm_backward, batchnorm_forward_training, batchnorm_inference, bn_bwd_weights, bn_finalize,
    genstats,
    groupnorm_backward, groupnorm_forward, instancenorm_backward, instancenorm_forward,
    layernorm_backward, layernorm_forward, rmsnorm_backward, rmsnorm_forward)
from .softmax import log_softmax, softmax, softmax_backward  # noqa: F401
from .resample import (  # noqa: F401
    resample_backward, resample_forward, resample_mode, resample_output_shape)
from .attention import alibi_slopes, sdpa_backward, sdpa_forward  # noqa: F401
from .norm_graph import norm_backward, norm_forward  # noqa: F401
from .rng import philox4x32_10, philox_uniform, philox_words, rng_generate  # noqa: F401
from .quantize import block_scale_dequantize, block_scale_quantize  # noqa: F401
from .paged import paged_cache_load  # noqa: F401
from .legacy import (  # noqa: F401
    activation_backward, activation_forward, add_tensor, blend, conv_backward_bias,
    conv_bias_activation_forward, dropout_backward, dropout_forward, op_tensor, scale_tensor)
from .lrn import lrn_backward, lrn_forward  # noqa: F401
from .spatial_tf import (  # noqa: F401
    spatial_tf_grid_backward, spatial_tf_grid_forward, spatial_tf_sampler_backward,
    spatial_tf_sampler_forward)
from .ctc import ctc_loss  # noqa: F401
from .rnn import rnn_backward, rnn_forward, rnn_gate_count  # noqa: F401
from .pointwise import POINTWISE_ARITY, pointwise, pointwise_mode  # noqa: F401
