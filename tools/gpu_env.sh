# Sourced by the one-call GPU scripts (tools/gpu_final_*1.sh, gpu_probe_*.sh, gpu_s8_*.sh) on the H200: $OUT, the wheels
# from .whl/ (numpy 2.4.6, cudnn-frontend) under /tmp/site, the environment, the commit (.gpustate/commit) and the kernel
# cache an earlier call left (.gpustate/kcache.tgz), and run NAME SECONDS COMMAND (its output in $OUT/NAME.txt, one
# line in $OUT/summary.txt).
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
[ -e /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1 NCUDNN_CACHE_DIR=$PWD/.kcache
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
mkdir -p .kcache && tar xzf .gpustate/kcache.tgz -C .kcache 2>/dev/null
run() { t0=$SECONDS; timeout $2 bash -c "$3" > $OUT/$1.txt 2>&1; echo "$1 rc $? $((SECONDS-t0)) s" >> $OUT/summary.txt; }
