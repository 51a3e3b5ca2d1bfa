#!/usr/bin/env bash
# One H200 box (16 cores), one device call (at most 10 minutes: BUDGET 480 s of fuzzing; give each call its own PART
# 1, 2, 3 for the seed and merge the calls' reports with `python -m ncudnn.fuzz --merge DIR1 DIR2 DIR3 --out DIR`,
# which sums their fuzz_report.json files):
# the differential fuzzer over every op family and every engine, one worker process per core
# (each its own CUDA context), every plan build_plans(ALL) yields over modes A / B / FALLBACK, DRAWS input draws per
# plan, stopping cleanly at the time budget; the report (cases per engine and per family, every registered engine
# listed, wrong and error counts with repro lines, seeds, wall time) as $OUT/fuzz$PART/fuzz_report.{json,md}.
# Knobs: SEED, BUDGET (seconds), JOBS, DRAWS, CASES.
#
# What the defaults are expected to reach (arithmetic, to be checked against the report's "per plan" and
# "per execution" figures): a case is one (graph, plan, draw) execution; a worker spends about b seconds building
# each plan (numba compiling its kernels: 1.6 s on average in the 2026-12-02 H200 calls) and t seconds on each
# execution (upload, execute, read back, compare; 1.5-4.7 ms there for tensors of modest size, before the runner
# ran each plan on a block of draws in a row and tensors were capped at 2^18 elements), so with D draws per plan
# it reaches D / (b + D t) cases a second. 16 workers x ~450 s (BUDGET less start-up) = 7,200 worker-seconds:
#   DRAWS=768, b = 2 s, t = 2 ms:  7200 * 768 / (2 + 1.5)  ~ 1.5 M cases, ~2,000 plans, ~150 graphs;
#   pessimistic b = 3 s, t = 3 ms: 7200 * 768 / (3 + 2.3)  ~ 1.0 M cases.
# A larger DRAWS buys cases at the cost of graphs (fewer plans built); when the report shows other b and t, pick
# D from 7200 * D / (b + D t) >= 1e6.
source "$(dirname "$0")/gpu_env.sh"
PART=${PART:-1} SEED=${SEED:-$((20261200 + ${PART:-1}))} BUDGET=${BUDGET:-480} JOBS=${JOBS:-$(nproc)} DRAWS=${DRAWS:-768} CASES=${CASES:-10000000}
run fuzz $((BUDGET + 90)) "python3 -m ncudnn.fuzz --seed $SEED --cases $CASES --jobs $JOBS --draws $DRAWS \
  --seconds $BUDGET --out $OUT/fuzz$PART"
# the per-case JSON lines are dropped (the report holds the counts and up to 500 failures with repro lines)
rm -f $OUT/fuzz$PART/worker-*.jsonl; tail -n 20 $OUT/fuzz$PART/worker-*.log > $OUT/fuzz$PART/worker_logs_tail.txt 2>/dev/null; rm -f $OUT/fuzz$PART/worker-*.log
mkdir -p .gpustate && tar czf .gpustate/kcache.tgz -C .kcache . 2>/dev/null
cat "$OUT/summary.txt" "$OUT/fuzz.txt"; head -60 "$OUT/fuzz$PART/fuzz_report.md"
