#!/usr/bin/env bash
# One H200 box (16 cores), one device call (at most 10 minutes: BUDGET 480 s of fuzzing; give each call its own PART
# 1, 2, 3 for the seed and merge the calls' reports with `python -m ncudnn.fuzz --merge DIR1 DIR2 DIR3 --out DIR`,
# which sums their fuzz_report.json files):
# the differential fuzzer over every op family and every engine, one worker process per core
# (each its own CUDA context), every plan build_plans(ALL) yields over modes A / B / FALLBACK, DRAWS input draws per
# plan, stopping cleanly at the time budget; the report (cases per engine and per family, wrong and error counts with
# repro lines, seeds, wall time) as $OUT/fuzz$PART/fuzz_report.{json,md}. Knobs: SEED, BUDGET (seconds), JOBS, DRAWS, CASES.
source "$(dirname "$0")/gpu_env.sh"
PART=${PART:-1} SEED=${SEED:-$((20261200 + ${PART:-1}))} BUDGET=${BUDGET:-480} JOBS=${JOBS:-$(nproc)} DRAWS=${DRAWS:-12} CASES=${CASES:-10000000}
run fuzz $((BUDGET + 90)) "python3 -m ncudnn.fuzz --seed $SEED --cases $CASES --jobs $JOBS --draws $DRAWS \
  --seconds $BUDGET --out $OUT/fuzz$PART"
# the per-case JSON lines are dropped (the report holds the counts and up to 500 failures with repro lines)
rm -f $OUT/fuzz$PART/worker-*.jsonl; tail -n 20 $OUT/fuzz$PART/worker-*.log > $OUT/fuzz$PART/worker_logs_tail.txt 2>/dev/null; rm -f $OUT/fuzz$PART/worker-*.log
mkdir -p .gpustate && tar czf .gpustate/kcache.tgz -C .kcache . 2>/dev/null
cat "$OUT/summary.txt" "$OUT/fuzz.txt"; head -40 "$OUT/fuzz$PART/fuzz_report.md"
