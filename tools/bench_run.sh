#!/usr/bin/env bash
# `ncudnn bench` in one GPU call, its results packed: each run's directory goes under /tmp and comes back as
# ONE tarball + ONE log in $OUT (a call returns at most 8 files). Redraw / merge here afterwards:
#   ncudnn bench --report quick.tgz          ncudnn bench --merge full0.tgz full1.tgz --out DIR
#
#   WHAT=quick  bash tools/bench_run.sh   # --quick --overhead           (< 5 min on the H200)
#   WHAT=tune   bash tools/bench_run.sh   # --quick --tune               (per-case tuning budget 15 s)
#   WHAT=shard SHARD=0/2 bash tools/bench_run.sh   # every 2nd case of the full suite (one 10-min call each)
#   WHAT=full2  bash tools/bench_run.sh   # two GPUs: shards 0/2 and 1/2 side by side, merged into full.tgz
#   ARGS="--filter gemm" adds options; MIN=minutes overrides the run's --max-minutes; NAME the file names;
#   the run's `timeout` is MIN minutes + SLACK s (45, or 150 with --overhead: it runs after the cases).
#   Quick in two calls of < 2.5 min:  WHAT=shard SHARD=0/2 NAME=quick0 ARGS="--quick --overhead" MIN=1.5, then 1/2
# The run stops cleanly at --max-minutes (between cases) or on the SIGTERM of its `timeout` (at once),
# writing what ran; results.json is rewritten after every case in any case.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
if [ -d .whl ] && [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed
fi
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=${NUMBA_ENABLE_CUDASIM:-0} PYTHONUNBUFFERED=1
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
RUNS=/tmp/ncudnn-bench-runs; mkdir -p "$RUNS"   # (the overhead scripts would also copy their JSON into an exported $OUT: unset for the run)

run() {  # run NAME MINUTES OPTIONS...: one bench run, SIGTERM $SLACK s past its budget, packed into $OUT/NAME.tgz
  local name=$1 min=$2; shift 2
  case " $* ${ARGS:-} " in *" --overhead "*) slack=${SLACK:-150} ;; *) slack=${SLACK:-45} ;; esac
  env -u OUT timeout -s TERM -k 30 $(python3 -c "print(int($min * 60 + $slack))") python3 -m ncudnn bench --no-charts \
    --max-minutes "$min" --out "$RUNS/$name" --pack "$OUT/$name.tgz" "$@" ${ARGS:-} > "$OUT/$name.log" 2>&1
  echo "$name rc $?" >> "$OUT/$name.log"
  # a run killed before its own --pack still left results.json (rewritten after every case): pack it here
  [ -f "$OUT/$name.tgz" ] || { [ -d "$RUNS/$name" ] && tar czf "$OUT/$name.tgz" -C "$RUNS" "$name"; }
  grep -E "cases ran|rows in" "$OUT/$name.log" | tail -n 2
}

case "${WHAT:-quick}" in
  quick) run "${NAME:-quick}" "${MIN:-4.5}" --quick --overhead ;;
  tune)  run "${NAME:-quick_tune}" "${MIN:-7.5}" --quick --tune ;;
  shard) SHARD=${SHARD:-0/2}; run "${NAME:-full${SHARD%%/*}}" "${MIN:-8}" --shard "$SHARD" ;;
  full2) CUDA_VISIBLE_DEVICES=0 run full0 "${MIN:-8}" --shard 0/2 --overhead &
         CUDA_VISIBLE_DEVICES=1 run full1 "${MIN:-8}" --shard 1/2 &
         wait
         python3 -m ncudnn bench --merge "$OUT/full0.tgz" "$OUT/full1.tgz" --out "$RUNS/full" --no-charts \
           --pack "$OUT/full.tgz" > "$OUT/merge.log" 2>&1; tail -n 1 "$OUT/merge.log" ;;
  *) echo "WHAT=quick|tune|shard|full2"; exit 2 ;;
esac
