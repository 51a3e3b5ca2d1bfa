#!/usr/bin/env bash
# Timing probes on the GPU machine, one after another, each under its own time cap, all into
# $OUT/probes.log (e.g. from tools/gpu_x2.sh). PROBES: probe commands separated by ';;'.
#   PROBES='python3 tools/probe_gemm.py 4096 8192;;python3 -m ncudnn.kernels.tc_gemm.timing' bash tools/gpu_probes.sh
set -u
[ -e /tmp/site/.installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && touch /tmp/site/.installed; }
export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1
export NCUDNN_CACHE_DIR=${NCUDNN_CACHE_DIR:-$PWD/.kcache}
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
IFS=$'\n' read -r -d '' -a cmds < <(printf '%s' "${PROBES:-}" | sed 's/;;/\n/g'; printf '\0')
for c in "${cmds[@]}"; do
  [ -n "${c// }" ] || continue
  echo "=== $c" >> "$OUT/probes.log"
  t0=$SECONDS
  timeout "${PROBE_TIMEOUT:-120}" bash -c "$c" >> "$OUT/probes.log" 2>&1
  echo "probe rc $? in $((SECONDS - t0)) s: $c" | tee -a "$OUT/summary.txt"
done
