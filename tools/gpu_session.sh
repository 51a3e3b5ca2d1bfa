#!/usr/bin/env bash
# One device call's worth of GPU evidence, in two parts that each fit the 10-minute command limit:
#   bash tools/gpu_session.sh tests   # suite at real shapes (front ends first), demo, sanitizer spot checks
#   bash tools/gpu_session.sh bench   # ncudnn bench --quick beside torch/cuDNN/cuBLAS/cudnn-frontend
#   bash tools/gpu_session.sh final   # bench --quick, demo --train, reruns (RERUN=...) and the REST test dirs
# Logs and results go to $OUT (default ./gpu-out). Wheels from ../shared/gpu/fetch-wheels.sh must be in .whl/.
set -u
[ -e /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1
# the disk kernel cache travels between calls: carry .kcache (unpacked from the last call's kcache.tgz)
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
# the commit the tree was sent at (write it before the call: git rev-parse HEAD > .gpustate/commit)
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
part=${1:-tests}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/env.txt"
python3 -m ncudnn info >> "$OUT/env.txt" 2>&1

if [ "$part" = tests ]; then
  # -v so a killed run still names every test it finished; per-test cap so one hang can't eat the call.
  # A test that breaks the CUDA context stops pytest (rc 3, tests/conftest.py); the run then restarts
  # with the tests not yet finished (NCUDNN_DONE_FILE), up to 4 times, within SUITE_TIMEOUT overall.
  export NCUDNN_DONE_FILE=${NCUDNN_DONE_FILE:-/tmp/ncudnn-done.txt}; rm -f "$OUT/pytest.log"
  [ -n "${KEEP_DONE:-}" ] || rm -f "$NCUDNN_DONE_FILE"  # KEEP_DONE=1: carry on after an earlier call's finished tests
  deadline=$((SECONDS + ${SUITE_TIMEOUT:-330}))
  for attempt in 1 2 3 4 5; do
    left=$((deadline - SECONDS)); [ $left -gt 10 ] || break
    NCUDNN_SHAPES=gpu timeout $left python3 -m pytest -v -p no:cacheprovider --timeout=90 \
      ${TEST_DIRS:-tests/frontend tests/backend \
      tests/legacy tests/engines tests/kernels tests/test_handle.py tests/test_memory.py} >> "$OUT/pytest.log" 2>&1
    rc=$?
    echo "pytest attempt $attempt rc $rc" | tee -a "$OUT/summary.txt"
    [ $rc -eq 3 ] || break
    grep "CUDA context broken" "$OUT/pytest.log" | tail -n 1 | cut -c1-300 | tee -a "$OUT/summary.txt"
  done
  grep -oE " (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) " "$OUT/pytest.log" | sort | uniq -c | tee -a "$OUT/summary.txt"
  grep -E " (FAILED|ERROR)" "$OUT/pytest.log" | grep "^tests" | head -60 | tee -a "$OUT/summary.txt"
  grep -E "^=+ .* in [0-9.]+s" "$OUT/pytest.log" | tee -a "$OUT/summary.txt"
  if [ -z "${SKIP_DEMO:-}" ]; then
  timeout "${DEMO_TIMEOUT:-120}" python3 -m ncudnn demo > "$OUT/demo.log" 2>&1
  echo "demo rc $?" | tee -a "$OUT/summary.txt"
  tail -n 15 "$OUT/demo.log" | tee -a "$OUT/summary.txt"
  fi
  for tool in ${SANITIZER_TOOLS-memcheck racecheck}; do
    NCUDNN_SHAPES=sim timeout "${SANITIZER_TIMEOUT:-70}" compute-sanitizer --tool $tool --print-limit 20 \
      python3 -m pytest -q -p no:cacheprovider -x ${SANITIZER_TESTS:-tests/engines/test_pointwise_e2e.py} \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$OUT/sanitizer_$tool.log" | tail -n 3 | tr '\n' ' ')" \
      | tee -a "$OUT/summary.txt"
  done
elif [ "$part" = sanitize ]; then
  # compute-sanitizer per test file (tiny shapes, real kernels), each file under its own cap, so one slow
  # file cannot hide the others' results: SANITIZER_TESTS (files or node ids), SANITIZER_TOOLS, SANITIZER_TIMEOUT
  unset NCUDNN_DONE_FILE  # a test run's finished-test list would deselect every test here
  for tool in ${SANITIZER_TOOLS-memcheck racecheck}; do
    for t in ${SANITIZER_TESTS:-tests/engines/test_pointwise_e2e.py}; do
      NCUDNN_SHAPES=sim timeout "${SANITIZER_TIMEOUT:-40}" compute-sanitizer --tool $tool --print-limit 20 \
        python3 -m pytest -q -p no:cacheprovider -x $t > /tmp/san.log 2>&1
      rc=$?
      cat /tmp/san.log >> "$OUT/sanitizer_$tool.log"
      echo "$tool rc $rc $t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' /tmp/san.log | tail -n 2 | tr '\n' ' ')" \
        | tee -a "$OUT/summary.txt"
    done
  done
elif [ "$part" = final ]; then
  if [ -n "${RERUN:-}" ]; then
    NCUDNN_SHAPES=gpu timeout "${RERUN_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider --tb=short $RERUN \
      > "$OUT/rerun.log" 2>&1
    echo "rerun rc $?: $(tail -n 1 "$OUT/rerun.log")" | tee -a "$OUT/summary.txt"
    grep -E "^(FAILED|ERROR)" "$OUT/rerun.log" | head -20 | tee -a "$OUT/summary.txt"
  fi
  if [ -n "${TC_TIMING:-}" ]; then
    timeout "${TC_TIMEOUT:-150}" python3 -m ncudnn.kernels.tc_gemm.timing $TC_TIMING > "$OUT/tc_timing.log" 2>&1
    echo "tc_gemm timing rc $?" | tee -a "$OUT/summary.txt"
    timeout 45 python3 - $TC_TIMING >> "$OUT/tc_timing.log" 2>&1 <<'PY'
import statistics, sys, torch
M, N, K = (int(x) for x in sys.argv[1:4])
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16); b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
for _ in range(3): torch.matmul(a, b)
ts = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.matmul(a, b); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
ms = statistics.median(ts)
print(f"cuBLAS BF16 {M}x{N}x{K}: {ms:.3f} ms {2 * M * N * K / ms / 1e9:.1f} TFLOP/s (median of 10)")
PY
    tail -n 12 "$OUT/tc_timing.log" | tee -a "$OUT/summary.txt"
  fi
  timeout "${BENCH_TIMEOUT:-300}" python3 -m ncudnn bench --quick --no-charts --max-minutes "${BENCH_MINUTES:-4}" \
    --out "$OUT/quick" > "$OUT/bench.log" 2>&1
  echo "bench rc $?" | tee -a "$OUT/summary.txt"
  timeout "${DEMO_TIMEOUT:-150}" python3 -m ncudnn demo --train > "$OUT/demo_train.log" 2>&1
  echo "demo --train rc $?: $(grep -E 'accuracy|PASS|FAIL' "$OUT/demo_train.log" | tail -n 3 | tr '\n' ' ')" \
    | tee -a "$OUT/summary.txt"
  if [ -n "${REST:-}" ]; then
    NCUDNN_SHAPES=gpu timeout "${REST_TIMEOUT:-120}" python3 -m pytest -v -p no:cacheprovider --timeout=60 $REST \
      > "$OUT/rest.log" 2>&1
    echo "rest rc $?: $(grep -c PASSED "$OUT/rest.log") passed, $(grep -c FAILED "$OUT/rest.log") failed" \
      | tee -a "$OUT/summary.txt"
    grep FAILED "$OUT/rest.log" | head -20 | tee -a "$OUT/summary.txt"
  fi
  tail -n 45 "$OUT/bench.log"
else
  # BENCH_ARGS e.g. "--shard 0/2 --max-minutes 8" (default: the quick subset)
  timeout "${BENCH_TIMEOUT:-560}" python3 -m ncudnn bench ${BENCH_ARGS:---quick --max-minutes 7} --no-charts \
    --out "$OUT/bench" > "$OUT/bench.log" 2>&1
  echo "bench rc $?" | tee -a "$OUT/summary.txt"
  grep -A14 "^## Summary" "$OUT/bench/report.md" | tee -a "$OUT/summary.txt"
  tail -n 5 "$OUT/bench.log"
fi
# hand the kernel cache back (the next call carries it as .kcache)
if [ -d "$NCUDNN_CACHE_DIR" ]; then
  tar czf "$OUT/kcache.tgz" -C "$NCUDNN_CACHE_DIR" . && echo "kcache $(du -sh "$OUT/kcache.tgz" | cut -f1)" | tee -a "$OUT/summary.txt"
fi
