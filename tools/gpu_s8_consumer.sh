#!/usr/bin/env bash
# One H200 (session 8, call D): each LN / RMS forward at 8192x1024 timed with a torch.sum of its y after it (what the
# evict-first y stores cost the next reader), then the pipelined kernel's engine tests at real shapes
source "$(dirname "$0")/gpu_env.sh"
run consumer 150 "python3 tools/probe_norm_sweep.py --consumer --rounds 8 --only fe,ncudnn,pipe-w4s4b3-nn,pipe-w4s4b3-regs-ef,sub128-nn,sub128-ee"
run tests 200 "NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider tests/engines/test_nrp_eng_fwd_pipe.py tests/engines/test_mbe_norm_knobs.py"
tar czf "$OUT/kcache.tgz" -C .kcache . 2>/dev/null
cat "$OUT/summary.txt"
