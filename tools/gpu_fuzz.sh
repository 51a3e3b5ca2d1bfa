#!/usr/bin/env bash
# One H200 box (16 cores): the differential fuzzer over every op family and every engine, one worker process per core
# (each its own CUDA context), every plan build_plans(ALL) yields over modes A / B / FALLBACK, DRAWS input draws per
# plan, stopping cleanly at the time budget; the report (cases per engine and per family, wrong and error counts with
# repro lines, seeds, wall time) as $OUT/fuzz/fuzz_report.{json,md}. Knobs: SEED, BUDGET (seconds), JOBS, DRAWS, CASES.
source "$(dirname "$0")/gpu_env.sh"
SEED=${SEED:-20261202} BUDGET=${BUDGET:-1380} JOBS=${JOBS:-$(nproc)} DRAWS=${DRAWS:-12} CASES=${CASES:-10000000}
run fuzz $((BUDGET + 120)) "python3 -m ncudnn.fuzz --seed $SEED --cases $CASES --jobs $JOBS --draws $DRAWS \
  --seconds $BUDGET --out $OUT/fuzz"
rm -f $OUT/fuzz/worker-*.jsonl.gz; gzip -f $OUT/fuzz/worker-*.jsonl 2>/dev/null
mkdir -p .gpustate && tar czf .gpustate/kcache.tgz -C .kcache . 2>/dev/null
cat "$OUT/summary.txt" "$OUT/fuzz.txt"; head -40 "$OUT/fuzz/fuzz_report.md"
