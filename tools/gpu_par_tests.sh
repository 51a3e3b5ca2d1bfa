#!/usr/bin/env bash
# The test suite at real shapes on one GPU, one pytest process per test file, PAR files at a time (JIT
# compiles are CPU-bound: on a 16-core host 8 processes finish the suite several times sooner than one).
#   PAR=8 SUITE_TIMEOUT=480 TEST_DIRS="tests/frontend tests/kernels" bash tools/gpu_par_tests.sh
# Files run longest first (by .gpustate/times.txt from an earlier run, else by size). A file whose test
# broke the CUDA context (rc 3, tests/conftest.py) restarts with its unfinished tests. What it leaves in
# $OUT: summary.txt, failures.txt (tracebacks as they happen), times.txt, logs/<file>.log, done.txt.
set -u
[ -n "${SKIP_INSTALL:-}" ] || [ -e /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=${SIM:-0} PYTHONUNBUFFERED=1 NCUDNN_SHAPES=${NCUDNN_SHAPES:-gpu}
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/logs"
export NCUDNN_DONE_FILE=$OUT/done.txt NCUDNN_FAIL_LOG=$OUT/failures.txt NCUDNN_TIMES_FILE=$OUT/times.txt
[ -n "${KEEP_DONE:-}" ] && [ -f .gpustate/done.txt ] && cat .gpustate/done.txt >> "$NCUDNN_DONE_FILE"
${PY:-python3} tools/order_tests.py ${TEST_DIRS:-tests} > "$OUT/files.txt"
echo "$(wc -l < "$OUT/files.txt") files, PAR=${PAR:-8}" | tee -a "$OUT/summary.txt"
one_file() {  # $1: test file; up to 3 attempts while a test breaks the CUDA context
  local f=$1 log="$OUT/logs/$(echo "$1" | tr / _).log" rc
  for attempt in 1 2 3; do
    timeout "${FILE_TIMEOUT:-400}" ${PY:-python3} -m pytest -v -p no:cacheprovider ${TIMEOUT_ARG---timeout=120} "$f" >> "$log" 2>&1
    rc=$?; [ $rc -eq 3 ] || break
    grep "CUDA context broken" "$log" | tail -n 1 | cut -c1-300 >> "$OUT/broken.txt"
  done
  echo "$rc $f" >> "$OUT/file_rc.txt"
}
export -f one_file; export OUT PY TIMEOUT_ARG
timeout "${SUITE_TIMEOUT:-480}" xargs -a "$OUT/files.txt" -P "${PAR:-8}" -I{} bash -c 'one_file {}'
echo "suite rc $? (124: SUITE_TIMEOUT hit)" | tee -a "$OUT/summary.txt"
cat "$OUT"/logs/*.log > "$OUT/pytest.log" 2>/dev/null
grep -oE " (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) " "$OUT/pytest.log" | sort | uniq -c | tee -a "$OUT/summary.txt"
grep -E " (FAILED|ERROR)" "$OUT/pytest.log" | grep "^tests" | head -60 | tee -a "$OUT/summary.txt"
[ -f "$OUT/broken.txt" ] && tee -a "$OUT/summary.txt" < "$OUT/broken.txt"
awk '$1 != 0 && $1 != 1 && $1 != 5 {print "file rc " $0}' "$OUT/file_rc.txt" | tee -a "$OUT/summary.txt"
comm -23 <(sort "$OUT/files.txt") <(awk '{print $2}' "$OUT/file_rc.txt" | sort) | sed 's/^/not finished: /' \
  | tee -a "$OUT/summary.txt"
