#!/usr/bin/env bash
# One H200 (session 8, call 1): the 8192x1024 layer / RMS norm forward variants against cuDNN in alternating rounds
# (tools/probe_norm_sweep.py), then the profiler's kernel durations of the bench's implementations.
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1 NCUDNN_CACHE_DIR=$PWD/.kcache
run() { t0=$SECONDS; timeout $2 bash -c "$3" > $OUT/$1.txt 2>&1; echo "$1 rc $? $((SECONDS-t0)) s" >> $OUT/summary.txt; }
run sweep 330 "python3 tools/probe_norm_sweep.py --rounds ${ROUNDS:-8}"
run kernels 90 "python3 tools/probe_kernels.py norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32"
cat $OUT/summary.txt
