#!/usr/bin/env bash
# One H200 (session 7 final call C): the memory-bound benchmark rows with the time-based warm-up, then the 8192x1024 LN / RMS
# rows again without it (NCUDNN_BENCH_WARMUP_S=0: the order effect it removes)
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && touch /tmp/site/.installed
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1 NCUDNN_CACHE_DIR=$PWD/.kcache
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
mkdir -p .kcache && tar xzf .gpustate/kcache.tgz -C .kcache 2>/dev/null
WHAT=shard SHARD=0/1 NAME=mb ARGS='--filter norm/,softmax/,pool/,pointwise/,reduce/' MIN=2.0 SLACK=20 \
  bash tools/bench_run.sh >> "$OUT/summary.txt"
NCUDNN_BENCH_WARMUP_S=0 WHAT=shard SHARD=0/1 NAME=nowarm ARGS='--filter norm/layernorm_fwd/8192x1024,norm/rmsnorm_fwd/8192x1024,norm/batchnorm_bwd/n32c256h56_nhwc' \
  MIN=1.0 SLACK=20 bash tools/bench_run.sh >> "$OUT/summary.txt"
[ -n "${EXTRA_TESTS:-}" ] && { s=$SECONDS; timeout 150 env NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider $EXTRA_TESTS > $OUT/tests.txt 2>&1; echo "tests rc $? $((SECONDS-s)) s" >> $OUT/summary.txt; }
cat "$OUT/summary.txt"
