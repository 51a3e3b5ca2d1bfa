# shellcheck shell=bash
# The preamble every tools/gpu_*.sh sources, from the repository root on the GPU machine (no network there:
# wheels of numpy 2.4 and nvidia-cudnn-frontend travel in .whl/, see ../shared/gpu/README.md):
#   - $OUT (what comes back from the machine; default ./gpu-out) and $WORK (scratch, default /tmp/ncudnn-gpu)
#   - the wheels of .whl/ installed once into /tmp/site (under a lock: scripts may start side by side)
#   - PYTHONPATH=/tmp/site:<repo>, NUMBA_ENABLE_CUDASIM=0 (SIM=1: the simulator), PYTHONUNBUFFERED=1
#   - NCUDNN_GIT_COMMIT from .gpustate/commit (write it before the call: git rev-parse HEAD > .gpustate/commit)
#   - the disk kernel cache NCUDNN_CACHE_DIR (default ./.kcache), unpacked from .gpustate/kcache.tgz if an
#     earlier call left one (pack_kcache writes $OUT/kcache.tgz for the next call)
# and two helpers: run NAME SECONDS COMMAND (output in $OUT/NAME.txt, one line "NAME rc RC S s" in
# $OUT/summary.txt) and pack_kcache.
OUT=${OUT:-$PWD/gpu-out}
WORK=${WORK:-/tmp/ncudnn-gpu}
PY=${PY:-python3}
mkdir -p "$OUT" "$WORK"
if [ -z "${SKIP_INSTALL:-}" ] && compgen -G ".whl/*.whl" > /dev/null; then
  (
    flock 9 2> /dev/null
    [ -e /tmp/site/.installed ] || { "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
  ) 9> /tmp/ncudnn-site.lock
fi
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export NUMBA_ENABLE_CUDASIM=${SIM:-0} PYTHONUNBUFFERED=1 NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
export OUT WORK PY
if [ -f .gpustate/commit ]; then NCUDNN_GIT_COMMIT=$(cat .gpustate/commit); export NCUDNN_GIT_COMMIT; fi
mkdir -p "$NCUDNN_CACHE_DIR"
[ -f .gpustate/kcache.tgz ] && tar xzf .gpustate/kcache.tgz -C "$NCUDNN_CACHE_DIR" 2> /dev/null

run() {  # run NAME SECONDS COMMAND: COMMAND under a time cap, its output in $OUT/NAME.txt
  local t0=$SECONDS rc
  timeout "$2" bash -c "$3" > "$OUT/$1.txt" 2>&1
  rc=$?
  echo "$1 rc $rc $((SECONDS - t0)) s" >> "$OUT/summary.txt"
  return $rc
}

pack_kcache() {  # the disk kernel cache as $OUT/kcache.tgz (carry it back as .gpustate/kcache.tgz)
  tar czf "$OUT/kcache.tgz" -C "$NCUDNN_CACHE_DIR" . 2> /dev/null
}
