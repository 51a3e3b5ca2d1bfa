#!/usr/bin/env bash
# All the GPU evidence on the 2-GPU machine in two 10-minute calls (from the repository root, wheels in .whl/):
#   PHASE=tests bash tools/gpu_final.sh
#     GPU 0: the whole test suite at real shapes (tools/gpu_par_tests.sh, PAR processes).
#     GPU 1: compute-sanitizer (memcheck, racecheck) over SAN_TESTS, then `ncudnn bench --quick --overhead`
#            (the quick suite's wall time and the host-overhead section), then $EXTRA1 (probe lines), if set.
#   PHASE=bench bash tools/gpu_final.sh
#     GPU k (k = 0, 1): `ncudnn bench --shard k/2` (the full suite, FULL_MIN minutes of cases each), then
#            `ncudnn bench --quick --tune --shard k/2` (the autotuned column, TUNE_MIN minutes).
# Everything comes back in $OUT/all.tgz and $OUT/summary.txt (a call returns at most 8 files); merge here with
#   ncudnn bench --merge g0/full0.tgz g1/full1.tgz --out bench/results/<gpu>/<date>/full   (same for tune0/1)
# On the one-GPU machine use tools/gpu_final1.sh.
SAN_TESTS=${SAN_TESTS:-"tests/engines/test_nrf_fused_bwd.py tests/kernels/test_nrf_kernel.py tests/engines/test_bnf_colsv.py
 tests/engines/test_tsk_engine.py tests/kernels/test_tsk_kernel.py tests/engines/test_skinny_tiles.py
 tests/engines/test_skinny_reduce.py tests/engines/test_wgt_tf32.py tests/engines/test_eng_norm_bnfinalize.py"}
export SAN_TESTS
# the commit the tree was sent at (write it before the call: git rev-parse HEAD > .gpustate/commit)
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
ENV='export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1'
case "${PHASE:-tests}" in
  tests)
    JOB0="$ENV; PAR=${PAR:-14} SUITE_TIMEOUT=${SUITE_TIMEOUT:-500} FILE_TIMEOUT=400 TIMEOUT_ARG=--timeout=240 \
      bash tools/gpu_par_tests.sh"
    JOB1="$ENV; PAR=9 SUITE_TIMEOUT=${SAN_TIMEOUT:-200} SANITIZER_TIMEOUT=190 SANITIZER_TESTS=\"\$SAN_TESTS\" \
      bash tools/gpu_par_sanitize.sh
      s=\$(date +%s); WHAT=quick MIN=${QUICK_MIN:-4.2} bash tools/bench_run.sh >> \$OUT/summary.txt
      echo \"bench --quick --overhead: \$(( \$(date +%s) - s )) s wall\" >> \$OUT/summary.txt
      ${EXTRA1:-true}" ;;
  bench)
    JOB='k=$CUDA_VISIBLE_DEVICES; WHAT=shard SHARD=$k/2 MIN=${FULL_MIN:-6.6} bash tools/bench_run.sh >> $OUT/summary.txt
      WHAT=shard SHARD=$k/2 NAME=tune$k ARGS="--quick --tune --tune-budget ${TUNE_BUDGET:-5}" MIN=${TUNE_MIN:-1.4} \
        SLACK=30 bash tools/bench_run.sh >> $OUT/summary.txt'
    JOB0="$ENV; $JOB"; JOB1="$ENV; $JOB" ;;
esac
export JOB0 JOB1
bash tools/gpu_x2.sh
