#!/usr/bin/env bash
# The GPU evidence on a ONE-GPU machine, in two calls of under 10 minutes each (from the repo root, wheels in .whl/):
#   PHASE=tests bash tools/gpu_final1.sh   # whole suite at real shapes (tools/gpu_par_tests.sh) while
#                                          # compute-sanitizer runs SAN_TESTS beside it (CPU-bound JIT: both fit)
#   PHASE=bench bash tools/gpu_final1.sh   # `ncudnn bench` (all suites) with the host-overhead benchmarks,
#                                          # alone on the GPU, then `--quick --tune` while time is left
# Results under $OUT (summary.txt, logs, bench/ and quick_tune/ result directories).
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && touch /tmp/site/.installed
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
if [ "${PHASE:-tests}" = tests ]; then
  # cases to time again (alone on the GPU) before the suite starts, e.g. after a default changed
  [ -n "${PRE_BENCH_FILTER:-}" ] && { timeout ${PRE_BENCH_TIMEOUT:-120} python3 -m ncudnn bench --no-charts \
      --filter "$PRE_BENCH_FILTER" --out "$OUT/rebench" > "$OUT/rebench.log" 2>&1; echo "rebench rc $?" >> "$OUT/summary.txt"; }
  # SAN_TESTS: memcheck and racecheck; SAN_MEMCHECK: memcheck only (test files or node ids)
  (export OUT=$OUT/san PAR=${SAN_PAR:-4} SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-300}
   SUITE_TIMEOUT=${SAN_SUITE_TIMEOUT:-300} SANITIZER_TESTS="${SAN_TESTS:-tests/engines/test_pointwise_e2e.py}" \
     bash tools/gpu_par_sanitize.sh > /dev/null 2>&1
   [ -n "${SAN_MEMCHECK:-}" ] && SUITE_TIMEOUT=${SAN_MEMCHECK_TIMEOUT:-180} SANITIZER_TOOLS=memcheck \
     SANITIZER_TESTS="$SAN_MEMCHECK" bash tools/gpu_par_sanitize.sh > /dev/null 2>&1) &
  timeout 60 python3 bench/bench_ranking.py --reps 15 > "$OUT/ranking.log" 2>&1
  OUT=$OUT/suite PAR=${PAR:-12} SUITE_TIMEOUT=${TEST_SUITE_TIMEOUT:-470} FILE_TIMEOUT=300 TIMEOUT_ARG=--timeout=280 \
    bash tools/gpu_par_tests.sh > /dev/null 2>&1
  wait
  cat "$OUT/suite/summary.txt" "$OUT/san/sanitize/lines.txt" >> "$OUT/summary.txt" 2>/dev/null
  grep -c PASSED "$OUT/suite/pytest.log" | sed 's/^/PASSED lines: /' >> "$OUT/summary.txt"
  grep -E "^(FAILED|ERROR) " "$OUT/suite/pytest.log" | head -40 >> "$OUT/summary.txt"
else
  timeout ${BENCH_TIMEOUT:-480} python3 -m ncudnn bench --overhead --no-charts --max-minutes ${BENCH_MINUTES:-7.6} \
    ${BENCH_ARGS:-} --out "$OUT/full" > "$OUT/bench.log" 2>&1
  echo "bench rc $?" >> "$OUT/summary.txt"; tail -n 6 "$OUT/bench.log" >> "$OUT/summary.txt"
fi
# the GPU is idle now: the autotuned column of the quick set with the time left in the call
left=$(( ${CALL_LIMIT:-590} - SECONDS - 20 ))
[ $left -gt 45 ] && { timeout $left python3 -m ncudnn bench --quick --tune --no-charts ${TUNE_ARGS:-} \
    --max-minutes $(python3 -c "print(round(($left - 25) / 60, 2))") --out "$OUT/quick_tune" > "$OUT/tune.log" 2>&1
  echo "quick --tune rc $? (cap $left s)" >> "$OUT/summary.txt"; }
tar czf "$OUT/kcache.tgz" -C "$NCUDNN_CACHE_DIR" . 2>/dev/null
cat "$OUT/summary.txt"
