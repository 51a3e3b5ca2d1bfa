#!/usr/bin/env bash
# Two jobs at once on the 2-GPU machine: $JOB0 runs on GPU 0, $JOB1 on GPU 1 (shell command lines, each
# with its own OUT=/tmp/x2/gK and CUDA_VISIBLE_DEVICES=K), e.g.
#   JOB0='bash tools/gpu_session.sh tests' JOB1='BENCH_ARGS="--shard 1/2" bash tools/gpu_session.sh bench' \
#     bash tools/gpu_x2.sh
# Both share the carried kernel cache (.kcache; writes are atomic renames). What comes back: $OUT/summary.txt
# (both jobs' summaries) and $OUT/all.tgz (every log and result, and the kernel cache as kcache.tgz).
set -u
FINAL=${OUT:-$PWD/gpu-out}
mkdir -p "$FINAL" /tmp/x2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && touch /tmp/site/.installed
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
for k in 0 1; do
  job_var=JOB$k
  job=${!job_var:-}
  [ -n "$job" ] || continue
  (export CUDA_VISIBLE_DEVICES=$k OUT=/tmp/x2/g$k; mkdir -p "$OUT"
   NCUDNN_DONE_FILE=$OUT/done.txt bash -c "$job" > "$OUT/job.log" 2>&1; echo "job $k rc $?" >> "$OUT/summary.txt") &
done
wait
for k in 0 1; do
  [ -f /tmp/x2/g$k/summary.txt ] && { echo "=== GPU $k: $(eval echo \$JOB$k | cut -c1-200)"; cat /tmp/x2/g$k/summary.txt; }
done > "$FINAL/summary.txt"
rm -f /tmp/x2/g*/kcache.tgz
tar czf /tmp/x2/kcache.tgz -C "$NCUDNN_CACHE_DIR" . 2>/dev/null
tar czf "$FINAL/all.tgz" -C /tmp/x2 .
cat "$FINAL/summary.txt"
