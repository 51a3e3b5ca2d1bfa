#!/usr/bin/env bash
# One H200 (session 7 final call C): the memory-bound benchmark rows with the time-based warm-up, then the 8192x1024 LN / RMS
# rows again without it (NCUDNN_BENCH_WARMUP_S=0: the order effect it removes)
source "$(dirname "$0")/gpu_env.sh"
WHAT=shard SHARD=0/1 NAME=mb ARGS='--filter norm/,softmax/,pool/,pointwise/,reduce/' MIN=2.0 SLACK=20 \
  bash tools/bench_run.sh >> "$OUT/summary.txt"
NCUDNN_BENCH_WARMUP_S=0 WHAT=shard SHARD=0/1 NAME=nowarm ARGS='--filter norm/layernorm_fwd/8192x1024,norm/rmsnorm_fwd/8192x1024,norm/batchnorm_bwd/n32c256h56_nhwc' \
  MIN=1.0 SLACK=20 bash tools/bench_run.sh >> "$OUT/summary.txt"
[ -n "${EXTRA_TESTS:-}" ] && { s=$SECONDS; timeout 150 env NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider $EXTRA_TESTS > $OUT/tests.txt 2>&1; echo "tests rc $? $((SECONDS-s)) s" >> $OUT/summary.txt; }
cat "$OUT/summary.txt"
