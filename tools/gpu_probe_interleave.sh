#!/usr/bin/env bash
# One H200 (session 7 final call D): the bench's implementations of the 8192x1024 LN / RMS and the NHWC BN backward in
# alternating rounds (tools/probe_interleave.py), helper A's pipelined norm kernel tests at real shapes and its probe
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && touch /tmp/site/.installed
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1 NCUDNN_CACHE_DIR=$PWD/.kcache
mkdir -p .kcache && tar xzf .gpustate/kcache.tgz -C .kcache 2>/dev/null
run() { t0=$SECONDS; timeout $2 bash -c "$3" > $OUT/$1.txt 2>&1; echo "$1 rc $? $((SECONDS-t0)) s" >> $OUT/summary.txt; }
run interleave 90 "python3 tools/probe_interleave.py --rounds 6 norm/layernorm_fwd/8192x1024/float32 norm/rmsnorm_fwd/8192x1024/float32 norm/batchnorm_bwd/n32c256h56_nhwc/float32"
run nrp_tests 70 "NCUDNN_SHAPES=gpu python3 -m pytest -q -p no:cacheprovider tests/kernels/test_nrp_forward.py"
run pipe 60 "python3 tools/probe_norm_pipe.py --set probe --budget 45"
cat $OUT/summary.txt
