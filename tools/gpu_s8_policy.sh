#!/usr/bin/env bash
# One H200 (session 8, call E): the pipelined LN / RMS forward with the evict-first policy on x and y, on x only, or
# none, against cuDNN, alone and with a torch.sum of y right after it, at 8192x1024 and 8192x512
source "$(dirname "$0")/gpu_env.sh"
V=fe,ncudnn,pipe-w4s4b3-nn,pipe-w4s4b3-regs-nn,pipe-w4s4b3-en,pipe-w4s4b3-regs-en,pipe-w4s4b3-ef,pipe-w4s4b3-regs-ef,sub128-nn
run alone1024 120 "python3 tools/probe_norm_sweep.py --rounds 8 --only copy,$V"
run consumer1024 120 "python3 tools/probe_norm_sweep.py --consumer --rounds 8 --only $V"
run alone512 90 "python3 tools/probe_norm_sweep.py --cols 512 --rounds 8 --only copy,$V"
run consumer512 90 "python3 tools/probe_norm_sweep.py --cols 512 --consumer --rounds 8 --only $V"
tar czf "$OUT/kcache.tgz" -C .kcache . 2>/dev/null
cat "$OUT/summary.txt"
