#!/usr/bin/env bash
# compute-sanitizer over test files (tiny simulator-sized shapes, real kernels on the GPU), PAR runs at
# a time, each (tool, file) under its own cap:
#   SANITIZER_TESTS="tests/engines/test_eng_winograd.py ..." SANITIZER_TOOLS="memcheck racecheck" \
#     PAR=8 SANITIZER_TIMEOUT=240 bash tools/gpu_par_sanitize.sh
# $OUT/sanitize/<tool>_<file>.log per run; one summary line per run in $OUT/summary.txt.
set -u
[ -e /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1 NCUDNN_SHAPES=sim
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
unset NCUDNN_DONE_FILE
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/sanitize"
one_run() {  # $1 tool, $2 test file or node id
  local log="$OUT/sanitize/$1_$(echo "$2" | tr '/:[]' '____').log" rc
  timeout "${SANITIZER_TIMEOUT:-240}" compute-sanitizer --tool "$1" --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider -x "$2" > "$log" 2>&1
  rc=$?
  echo "$1 rc $rc $2: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$log" | tail -n 2 | tr '\n' ' ')" \
    >> "$OUT/sanitize/lines.txt"
}
export -f one_run; export OUT SANITIZER_TIMEOUT
for tool in ${SANITIZER_TOOLS:-memcheck racecheck}; do
  for t in ${SANITIZER_TESTS:-tests/engines/test_pointwise_e2e.py}; do echo "$tool $t"; done
done | timeout "${SUITE_TIMEOUT:-500}" xargs -P "${PAR:-8}" -L 1 bash -c 'one_run "$0" "$1"'
sort "$OUT/sanitize/lines.txt" | tee -a "$OUT/summary.txt"
