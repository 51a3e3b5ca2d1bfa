#!/usr/bin/env bash
# One H200 (session 8, final call A): the LN / RMS forward variants at 8192x512 against cuDNN (tools/probe_norm_sweep.py),
# the memory-bound benchmark rows, then the bench's 8192x1024 LN / RMS and NHWC BN backward in alternating rounds
source "$(dirname "$0")/gpu_env.sh"
run sweep512 120 "python3 tools/probe_norm_sweep.py --cols 512 --rounds 8 --only fe,ncudnn,copy,sub128-ee,sub128-en,pipe-w4s4b3-regs-ef,pipe-w4s4b3-ef,pipe-w4s3b4-ef,pipe-w2s8b3-ef"
WHAT=shard SHARD=0/1 NAME=mb ARGS='--filter norm/,softmax/,pool/,pointwise/,reduce/' MIN=2.5 SLACK=20 \
  bash tools/bench_run.sh >> "$OUT/summary.txt"
run interleave 120 "python3 tools/probe_interleave.py --rounds 8 norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32 norm/batchnorm_bwd/n32c256h56_nhwc/float32"
tar czf "$OUT/kcache.tgz" -C .kcache . 2>/dev/null
cat "$OUT/summary.txt"
