#!/usr/bin/env bash
# One H200, one call (session 7 final call A): the whole suite at real shapes (PAR 15, cut at SUITE_TIMEOUT; done.txt lets
# call B finish the rest) with compute-sanitizer on the new kernels' tests beside it
source "$(dirname "$0")/gpu_env.sh"
W=/tmp/f7; mkdir -p $W
(OUT=$W/san PAR=3 SUITE_TIMEOUT=${SAN_TIMEOUT:-420} SANITIZER_TIMEOUT=300 SANITIZER_TESTS="${SAN_TESTS:-tests/engines/test_bnp_persist.py tests/kernels/test_gsync_barrier.py}" bash tools/gpu_par_sanitize.sh > /dev/null 2>&1) &
OUT=$W/suite PAR=${PAR:-15} SUITE_TIMEOUT=${SUITE_TIMEOUT:-480} FILE_TIMEOUT=300 TIMEOUT_ARG=--timeout=240 bash tools/gpu_par_tests.sh > /dev/null 2>&1
wait
cat "$W/suite/summary.txt" "$W/san/sanitize/lines.txt" >> "$OUT/summary.txt" 2>/dev/null
cp $W/suite/done.txt $OUT/done.txt 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$W" suite san 2>/dev/null
tar czf "$OUT/kcache.tgz" -C .kcache . 2>/dev/null
grep -v "^not finished" "$OUT/summary.txt"; grep -c "^not finished" "$OUT/summary.txt"
