#!/usr/bin/env bash
# The test suite at real shapes (NCUDNN_SHAPES=gpu) on one GPU: one pytest process per test file, PAR files at
# a time (numba's JIT is CPU-bound: on a 16-core host 8-14 processes finish several times sooner than one).
#   bash tools/gpu_tests.sh                                   # every test file under tests/
#   bash tools/gpu_tests.sh tests/engines tests/kernels/primitives/test_ptx_compile.py -k "winograd and not bf16"
#   PAR=14 SUITE_TIMEOUT=480 FILE_TIMEOUT=400 TEST_TIMEOUT=240 bash tools/gpu_tests.sh
# Arguments: test files or directories (default tests/), -k EXPR, and after -- more pytest options.
# Files run longest first (by .gpustate/times.txt, the times.txt of an earlier run, else by size); a file known
# to take over SPLIT_S seconds (default 400), or every file when SHARDS=N, runs as several processes. A test that
# breaks the CUDA context ends its process with rc 3 (tests/conftest.py); the file restarts (twice at most)
# with the tests not yet done. KEEP_DONE=1 skips the tests .gpustate/done.txt lists (to finish a cut run), but
# for those .gpustate/failed.txt lists when RETRY_FAILED=1 (a failed test counts as done otherwise);
# SHAPES=sim runs the tiny simulator shapes on the GPU instead.
# What it leaves in $OUT: tests.txt (counts, failed tests, broken contexts, unfinished files), failures.txt
# (each failure's traceback, appended as it happens: a run cut by SUITE_TIMEOUT keeps them) and tests_logs.tgz
# (a log per file, times.txt, done.txt, failed.txt).
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
paths=() K_EXPR="" PYTEST_EXTRA=""
while [ $# -gt 0 ]; do
  case "$1" in
    -k) K_EXPR=$2; shift 2 ;;
    --) shift; PYTEST_EXTRA="$*"; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) paths+=("$1"); shift ;;
  esac
done
[ ${#paths[@]} -gt 0 ] || read -r -a paths <<< "${TEST_DIRS:-tests}"   # TEST_DIRS: the older spelling
W=$WORK/tests; rm -rf "$W"; mkdir -p "$W/logs"
export NCUDNN_SHAPES=${SHAPES:-gpu} NCUDNN_DONE_FILE=$W/done.txt NCUDNN_FAIL_LOG=$OUT/failures.txt \
  NCUDNN_TIMES_FILE=$W/times.txt
: > "$NCUDNN_FAIL_LOG"
if [ -n "${KEEP_DONE:-}" ] && [ -f .gpustate/done.txt ]; then
  if [ -n "${RETRY_FAILED:-}" ] && [ -s .gpustate/failed.txt ]; then
    grep -vxFf .gpustate/failed.txt .gpustate/done.txt >> "$NCUDNN_DONE_FILE"
  else
    cat .gpustate/done.txt >> "$NCUDNN_DONE_FILE"
  fi
fi
S=$OUT/tests.txt; : > "$S"
"$PY" tools/order_tests.py "${paths[@]}" > "$W/files.txt"
echo "$(wc -l < "$W/files.txt") files, PAR=${PAR:-8}${K_EXPR:+, -k $K_EXPR}" | tee -a "$S"

# shellcheck disable=SC2317  # invoked through xargs
one_file() {  # $1: a test file (FILE@I/N: its shard I of N); up to 3 attempts while a test breaks the context
  local f=${1%@*} log rc shard=
  [ "$f" = "$1" ] || shard=${1##*@}
  log="$W/logs/$(echo "$1" | tr / _).log"
  for _ in 1 2 3; do
    # shellcheck disable=SC2086  # PYTEST_EXTRA: options, split on purpose
    NCUDNN_SHARD=$shard timeout "${FILE_TIMEOUT:-400}" "$PY" -m pytest -v -p no:cacheprovider ${TEST_TIMEOUT:+--timeout="$TEST_TIMEOUT"} \
      ${K_EXPR:+-k "$K_EXPR"} $PYTEST_EXTRA "$f" >> "$log" 2>&1
    rc=$?; [ "$rc" -eq 3 ] || break
    grep "CUDA context broken" "$log" | tail -n 1 | cut -c1-300 >> "$W/broken.txt"
  done
  echo "$rc $1" >> "$W/file_rc.txt"
}
TEST_TIMEOUT=${TEST_TIMEOUT-120}   # per test (pytest-timeout); TEST_TIMEOUT= (empty): none
export -f one_file; export W K_EXPR PYTEST_EXTRA TEST_TIMEOUT
timeout "${SUITE_TIMEOUT:-480}" xargs -a "$W/files.txt" -P "${PAR:-8}" -I{} bash -c 'one_file {}'
echo "suite rc $? (124: SUITE_TIMEOUT hit)" | tee -a "$S"
cat "$W"/logs/*.log > "$W/pytest.log" 2> /dev/null
grep -oE " (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) " "$W/pytest.log" | sort | uniq -c | tee -a "$S"
grep -E " (FAILED|ERROR)" "$W/pytest.log" | grep "^tests" | head -60 | tee -a "$S"
grep -E "^tests\S* (FAILED|ERROR)" "$W/pytest.log" | awk '{print $1}' | sort -u > "$W/failed.txt"
[ -f "$W/broken.txt" ] && tee -a "$S" < "$W/broken.txt"
touch "$W/file_rc.txt"
awk '$1 != 0 && $1 != 1 && $1 != 5 {print "file rc " $0}' "$W/file_rc.txt" | tee -a "$S"
comm -23 <(sort "$W/files.txt") <(awk '{print $2}' "$W/file_rc.txt" | sort) | sed 's/^/not finished: /' | tee -a "$S"
tar czf "$OUT/tests_logs.tgz" -C "$WORK" tests 2> /dev/null
grep -qE " (FAILED|ERROR)|^file rc|^not finished" "$S" && exit 1
exit 0
