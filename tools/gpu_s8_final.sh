#!/usr/bin/env bash
# One H200 (session 8, final call F, the x-only L2 policy defaults): the memory-bound benchmark rows, the bench's
# 8192x1024 LN / RMS and NHWC BN backward in alternating rounds, the LN / RMS defaults with a consumer of y after them,
# the norm row engine tests at real shapes, compute-sanitizer on the pipelined kernel's engine tests
source "$(dirname "$0")/gpu_env.sh"
(SANITIZER_TESTS="tests/engines/test_nrp_eng_fwd_pipe.py" PAR=2 SANITIZER_TIMEOUT=200 SUITE_TIMEOUT=220 \
  OUT=/tmp/san bash tools/gpu_par_sanitize.sh > /dev/null 2>&1; cp /tmp/san/sanitize/lines.txt $OUT/sanitize.txt) &
run tests 200 "NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider tests/engines/test_nrp_eng_fwd_pipe.py tests/engines/test_mbe_norm_knobs.py tests/engines/test_nrh_eng_fwd_sub.py tests/kernels/test_nrp_forward.py tests/engines/test_eng_norm_rows.py"
wait
WHAT=shard SHARD=0/1 NAME=mb ARGS='--filter norm/,softmax/,pool/,pointwise/,reduce/' MIN=2.5 SLACK=20 \
  bash tools/bench_run.sh >> "$OUT/summary.txt"
run interleave 120 "python3 tools/probe_interleave.py --rounds 8 norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32 norm/batchnorm_bwd/n32c256h56_nhwc/float32"
run consumer 100 "python3 tools/probe_norm_sweep.py --consumer --rounds 8 --only fe,ncudnn,sub128-nn,sub128-en,pipe-w4s4b3-en"
cat "$OUT/summary.txt" "$OUT/sanitize.txt"
