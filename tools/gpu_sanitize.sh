#!/usr/bin/env bash
# compute-sanitizer over test files or node ids at the tiny simulator shapes (NCUDNN_SHAPES=sim: real kernels on
# the GPU, small enough for the sanitizer), PAR runs at a time, each (tool, test) under its own time cap:
#   bash tools/gpu_sanitize.sh tests/engines/winograd/test_winograd_engines.py tests/kernels/primitives/test_ptx_compile.py::test_x
#   TOOLS="memcheck" PAR=8 SANITIZER_TIMEOUT=240 SUITE_TIMEOUT=500 bash tools/gpu_sanitize.sh FILES...
# Default tests: $SANITIZER_TESTS, else tests/engines/pointwise/test_pointwise_e2e.py. TOOLS: any of memcheck racecheck
# initcheck synccheck (default "memcheck racecheck").
# What it leaves in $OUT: sanitize.txt (one line per run: tool, rc, test, the sanitizer's and pytest's summaries)
# and sanitize_logs.tgz (the full log of every run).
set -u
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
case "${1:-}" in -h|--help) sed -n '2,9p' "$0"; exit 0 ;; esac
[ $# -gt 0 ] || read -r -a tests <<< "${SANITIZER_TESTS:-tests/engines/pointwise/test_pointwise_e2e.py}"
[ $# -gt 0 ] && tests=("$@")
export NCUDNN_SHAPES=sim
unset NCUDNN_DONE_FILE
W=$WORK/sanitize; rm -rf "$W"; mkdir -p "$W"
# shellcheck disable=SC2317  # invoked through xargs
one_run() {  # $1 tool, $2 test file or node id
  local log rc
  log="$W/$1_$(echo "$2" | tr '/:[]' '____').log"
  timeout "${SANITIZER_TIMEOUT:-240}" compute-sanitizer --tool "$1" --print-limit 20 \
    "$PY" -m pytest -q -p no:cacheprovider -x "$2" > "$log" 2>&1
  rc=$?
  echo "$1 rc $rc $2: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$log" | tail -n 2 | tr '\n' ' ')" \
    >> "$W/lines.txt"
}
export -f one_run; export W SANITIZER_TIMEOUT
# shellcheck disable=SC2016  # $0 / $1: the inner bash's
for tool in ${TOOLS:-${SANITIZER_TOOLS:-memcheck racecheck}}; do
  for t in "${tests[@]}"; do echo "$tool $t"; done
done | timeout "${SUITE_TIMEOUT:-500}" xargs -P "${PAR:-8}" -L 1 bash -c 'one_run "$0" "$1"'
echo "sanitize rc $? (124: SUITE_TIMEOUT hit)" > "$OUT/sanitize.txt"
touch "$W/lines.txt"
sort "$W/lines.txt" | tee -a "$OUT/sanitize.txt"
tar czf "$OUT/sanitize_logs.tgz" -C "$WORK" sanitize 2> /dev/null
# a clean run: every line rc 0 with "0 errors" / "0 hazards"
awk '$3 != 0' "$W/lines.txt" | grep -q . && exit 1
[ "$(wc -l < "$W/lines.txt")" -gt 0 ] || exit 1
exit 0
