#!/usr/bin/env bash
# `ncudnn bench` (ncudnn beside cuDNN / cuBLAS in one process) in one GPU call, each run packed as ONE tarball
# and ONE log in $OUT (a call returns at most 8 files). From the repository root on the GPU machine:
#   bash tools/gpu_bench.sh quick                 # the representative subset with the host-overhead section (< 5 min)
#   bash tools/gpu_bench.sh tune                  # the quick subset with the autotuned column (ncudnn-tuned)
#   bash tools/gpu_bench.sh families norm,softmax # the cases of these families (conv gemm norm pool softmax
#                                                 # pointwise reduce attention; the memory-bound ones: norm,softmax,
#                                                 # pool,pointwise,reduce)
#   bash tools/gpu_bench.sh full                  # the whole suite on one GPU with --overhead, MIN minutes of cases
#                                                 # (default 8: the rest is recorded as skipped; use shards for all)
#   bash tools/gpu_bench.sh shard 0/2             # every 2nd case of the full suite: the full suite is two
#                                                 # 10-minute calls on one GPU (shard 0/2, then 1/2)
#   bash tools/gpu_bench.sh full2                 # a 2-GPU machine: both shards side by side, merged (with --overhead)
#   bash tools/gpu_bench.sh quick -- --filter gemm   # after --: more `ncudnn bench` options
# Environment: MIN (the run's --max-minutes: cases past it are recorded as skipped), SLACK (seconds past MIN
# before SIGTERM; 45, or 150 with --overhead, which runs after the cases), NAME (the file names).
# What it leaves in $OUT: bench_NAME.tgz (results.json, report.md; charts with CHARTS=1) and bench_NAME.log.
# Redraw or merge here afterwards:
#   ncudnn bench --report bench_quick.tgz --out DIR
#   ncudnn bench --merge bench_full0.tgz bench_full1.tgz --out DIR
# The run stops cleanly at --max-minutes (between cases) or on its timeout's SIGTERM (at once), writing what ran.
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
what=${1:-quick}; [ $# -gt 0 ] && shift
arg=""
case "$what" in shard|families) arg=${1:-}; [ $# -gt 0 ] && shift ;; esac
[ "${1:-}" = "--" ] && shift
extra=("$@")
RUNS=$WORK/bench; mkdir -p "$RUNS"

bench() {  # bench NAME MINUTES OPTIONS...: one run, SIGTERM $SLACK s past its budget, packed into $OUT/bench_NAME.tgz
  local name=$1 min=$2 slack cap charts=--no-charts rc
  shift 2
  case " $* " in *" --overhead "*) slack=${SLACK:-150} ;; *) slack=${SLACK:-45} ;; esac
  [ -n "${CHARTS:-}" ] && charts=""
  cap=$("$PY" -c "print(int($min * 60 + $slack))")
  rm -rf "${RUNS:?}/$name"
  timeout -s TERM -k 30 "$cap" "$PY" -m ncudnn bench $charts --max-minutes "$min" --out "$RUNS/$name" \
    --pack "$OUT/bench_$name.tgz" "$@" > "$OUT/bench_$name.log" 2>&1
  rc=$?
  echo "bench_$name rc $rc" >> "$OUT/bench_$name.log"
  # a run killed before its own --pack still left results.json (rewritten after every case): pack it here
  [ -f "$OUT/bench_$name.tgz" ] || { [ -d "$RUNS/$name" ] && tar czf "$OUT/bench_$name.tgz" -C "$RUNS" "$name"; }
  echo "bench_$name rc $rc: $(grep -E 'cases ran|rows in' "$OUT/bench_$name.log" | tail -n 1)" | tee -a "$OUT/summary.txt"
  return $rc
}

case "$what" in
  quick) bench "${NAME:-quick}" "${MIN:-4.5}" --quick --overhead "${extra[@]}" ;;
  tune)  bench "${NAME:-quick_tune}" "${MIN:-7.5}" --quick --tune "${extra[@]}" ;;
  families)
    [ -n "$arg" ] || { echo "gpu_bench.sh families FAM[,FAM...]"; exit 2; }
    filter=$(echo "$arg" | tr ',' '\n' | sed '/^$/d; s#$#/#' | paste -sd, -)
    bench "${NAME:-$(echo "$arg" | tr ',' '_')}" "${MIN:-8}" --filter "$filter" "${extra[@]}" ;;
  full)  bench "${NAME:-full}" "${MIN:-8}" --overhead "${extra[@]}" ;;
  shard)
    case "$arg" in */*) ;; *) echo "gpu_bench.sh shard I/N"; exit 2 ;; esac
    bench "${NAME:-full${arg%%/*}}" "${MIN:-8}" --shard "$arg" "${extra[@]}" ;;
  full2)
    CUDA_VISIBLE_DEVICES=0 bench full0 "${MIN:-8}" --shard 0/2 --overhead "${extra[@]}" &
    CUDA_VISIBLE_DEVICES=1 bench full1 "${MIN:-8}" --shard 1/2 "${extra[@]}" &
    wait
    "$PY" -m ncudnn bench --merge "$OUT/bench_full0.tgz" "$OUT/bench_full1.tgz" --out "$RUNS/full" --no-charts \
      --pack "$OUT/bench_full.tgz" > "$OUT/bench_merge.log" 2>&1
    tail -n 1 "$OUT/bench_merge.log" | tee -a "$OUT/summary.txt" ;;
  -h|--help) sed -n '2,24p' "$0" ;;
  *) echo "gpu_bench.sh quick|tune|families FAM,...|full|shard I/N|full2 [-- ncudnn bench options]"; exit 2 ;;
esac
