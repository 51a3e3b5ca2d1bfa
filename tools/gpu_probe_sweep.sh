#!/usr/bin/env bash
# One H200 (session 8, call 1): the 8192x1024 layer / RMS norm forward variants against cuDNN in alternating rounds
# (tools/probe_norm_sweep.py), then the profiler's kernel durations of the bench's implementations.
source "$(dirname "$0")/gpu_env.sh"
run sweep 330 "python3 tools/probe_norm_sweep.py --rounds ${ROUNDS:-8}"
run kernels 90 "python3 tools/probe_kernels.py norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32"
cat $OUT/summary.txt
