#!/usr/bin/env bash
# One H200 (session 7 final call D): the bench's implementations of the 8192x1024 LN / RMS and the NHWC BN backward in
# alternating rounds (tools/probe_interleave.py), helper A's pipelined norm kernel tests at real shapes and its probe
source "$(dirname "$0")/gpu_env.sh"
run interleave 90 "python3 tools/probe_interleave.py --rounds 6 norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32 norm/batchnorm_bwd/n32c256h56_nhwc/float32"
run nrp_tests 70 "NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider tests/kernels/test_nrp_forward.py"
run pipe 60 "python3 tools/probe_norm_pipe.py --set probe --budget 45"
cat $OUT/summary.txt
