#!/usr/bin/env bash
# The test run for the GPU machine (H200, sm_90; no network; Python 3.12). From the repository root:
#   bash tools/gpu_suite.sh
# Steps: environment and versions, the sm_90 compile check, the whole suite at real shapes
# (NCUDNN_SHAPES=gpu), compute-sanitizer memcheck and racecheck over the kernel and engine tests at
# tiny shapes. Every step runs whatever the others did; $OUT/summary.txt (printed last) has the counts
# and each step's exit status.
# Knobs: OUT (results folder, default ./gpu-out); STEPS (default "env compile pytest memcheck racecheck":
# a device command is limited to 10 minutes, so long runs can go step by step into the same OUT);
# PYTEST_ARGS (extra pytest arguments for the suite); SANITIZER_K (pytest -k expression for the sanitizer
# runs); timeouts in seconds: COMPILE_TIMEOUT (240), SUITE_TIMEOUT (300), SANITIZER_TIMEOUT (120 per tool).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
rc_wheels=$?
set -u
if [ "$rc_wheels" -ne 0 ]; then
  echo "gpu_suite: installing .whl/*.whl failed (rc $rc_wheels): numba-cuda may not import (numpy 2.5)"
  export PYTHONPATH=$PWD
fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=" ${STEPS:-env compile pytest memcheck racecheck} "
COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-240}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-300}
SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-120}
export NUMBA_ENABLE_CUDASIM=0   # never fall back to the simulator here
RC_FILE="$OUT/rc.txt"  # exit statuses survive across step-by-step calls
touch "$RC_FILE"

step() {  # step NAME: banner
  echo
  echo "=== $1 ==="
}
want() { [[ "$STEPS" == *" $1 "* ]]; }
record() {  # record NAME RC
  grep -v "^$1 " "$RC_FILE" > "$RC_FILE.tmp"; echo "$1 $2" >> "$RC_FILE.tmp"; mv "$RC_FILE.tmp" "$RC_FILE"
}
record wheels "$rc_wheels"

# ------------------------------------------------------------------------------- environment
if want env; then
step "environment"
{
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm --format=csv
  nvidia-smi -L
  python3 --version
  python3 - <<'PY'
from importlib import metadata
for dist in ("numpy", "numba", "numba-cuda", "cuda-python", "cuda-bindings", "ml_dtypes", "torch", "cupy-cuda12x",
             "cupy-cuda13x", "nvidia-cudnn-frontend", "pytest"):
    try:
        print(f"{dist} {metadata.version(dist)}")
    except metadata.PackageNotFoundError:
        pass
PY
  compute-sanitizer --version | tail -n 1
  python3 -m ncudnn info
} 2>&1 | tee "$OUT/env.txt"
record env "${PIPESTATUS[0]}"
fi

# ---------------------------------------------------------------------------- compile check
if want compile; then
step "compile check (sm_90: registers, spills, local memory)"
timeout "$COMPILE_TIMEOUT" python3 -m ncudnn.kernels.compile_check --jobs "$(nproc)" 2>&1 | tee "$OUT/compile_check.txt"
record compile_check "${PIPESTATUS[0]}"
fi

# --------------------------------------------------------------------- the suite, real shapes
if want pytest; then
step "pytest at real shapes (NCUDNN_SHAPES=gpu)"
NCUDNN_SHAPES=gpu timeout "$SUITE_TIMEOUT" python3 -m pytest -q -p no:cacheprovider -o junit_family=xunit2 \
  --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest.log"
record pytest "${PIPESTATUS[0]}"
fi

# ------------------------------------------------------------------------------- sanitizers
SAN_DIRS=()
for d in tests/kernels tests/engines; do
  [ -d "$d" ] && SAN_DIRS+=("$d")
done
K_ARGS=()
[ -n "${SANITIZER_K:-}" ] && K_ARGS=(-k "$SANITIZER_K")
for tool in memcheck racecheck; do
  want "$tool" || continue
  step "compute-sanitizer --tool $tool (${SAN_DIRS[*]:-no kernel/engine test directories})"
  if [ "${#SAN_DIRS[@]}" -eq 0 ]; then
    echo "no tests/kernels or tests/engines: skipped" | tee "$OUT/sanitizer_$tool.log"
    record "$tool" 0
    continue
  fi
  NCUDNN_SHAPES=sim timeout "$SANITIZER_TIMEOUT" compute-sanitizer --tool "$tool" --target-processes all \
    --print-limit 50 --error-exitcode 86 \
    python3 -m pytest -q -p no:cacheprovider -x "${SAN_DIRS[@]}" ${K_ARGS[@]+"${K_ARGS[@]}"} > "$OUT/sanitizer_$tool.log" 2>&1
  record "$tool" $?
  tail -n 15 "$OUT/sanitizer_$tool.log"
done

# ---------------------------------------------------------------------------------- summary
step "summary"
python3 - "$OUT" <<'PY' > "$OUT/summary.txt" 2>&1
import pathlib, re, sys
import xml.etree.ElementTree as ET

out = pathlib.Path(sys.argv[1])
rcs = dict(line.split() for line in (out / "rc.txt").read_text().splitlines() if line.strip())
rc_env, rc_cc, rc_pytest, rc_mem, rc_race, rc_wheels = (
    rcs.get(k, "not run") for k in ("env", "compile_check", "pytest", "memcheck", "racecheck", "wheels"))
lines = []

def count_junit(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tot = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    tot["passed"] = tot["tests"] - tot["failures"] - tot["errors"] - tot["skipped"]
    return tot

t = count_junit(out / "junit.xml")
if t:
    lines.append(f"pytest (real shapes): {t['passed']} passed, {t['failures']} failed, {t['errors']} errors, "
                 f"{t['skipped']} skipped of {t['tests']}   rc {rc_pytest}")
else:
    lines.append(f"pytest (real shapes): no junit.xml   rc {rc_pytest}")

cc = (out / "compile_check.txt")
cc_last = cc.read_text().strip().splitlines()[-1:] if cc.exists() else []
lines.append(f"compile check: {cc_last[0] if cc_last else 'no output'}   rc {rc_cc}")

for tool, rc in (("memcheck", rc_mem), ("racecheck", rc_race)):
    p = out / f"sanitizer_{tool}.log"
    text = p.read_text(errors="replace") if p.exists() else ""
    errs = sum(int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) error", text))
    hazards = sum(int(n) for n in re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text))
    outcome = re.compile(r"\d+ (passed|failed|deselected|skipped|errors?)\b|no tests ran")
    tail = [l for l in text.splitlines() if outcome.search(l) and not l.startswith("=========")]
    extra = f", {hazards} hazards" if tool == "racecheck" else ""
    lines.append(f"compute-sanitizer {tool}: {errs} errors{extra}; pytest: {tail[-1].strip() if tail else 'n/a'}"
                 f"   rc {rc}")

lines.append(f"exit statuses: wheels {rc_wheels}, env {rc_env}, compile_check {rc_cc}, pytest {rc_pytest}, "
             f"memcheck {rc_mem}, racecheck {rc_race}")
print("\n".join(lines))
PY
cat "$OUT/summary.txt"
