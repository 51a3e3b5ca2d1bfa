#!/usr/bin/env bash
# All the GPU evidence in one 10-minute call on the 2-GPU machine (from the repository root, wheels in .whl/):
#   bash tools/gpu_final.sh
# GPU 0: `ncudnn bench` shard 0/2 with the host-overhead benchmarks, compute-sanitizer (memcheck and
#        racecheck, SAN_TESTS below), then `ncudnn bench --quick --tune` for the autotuned column (TUNE_MINUTES).
# GPU 1: the cold-ranking benchmark (CPU), `ncudnn bench` shard 1/2, then the whole test suite at real shapes (tools/gpu_par_tests.sh).
# Results under $OUT (all.tgz, summary.txt); merge the two shards here with
#   ncudnn bench --merge g0/full0 g1/full1 --out bench/results/<gpu>/<date>/full
# On one GPU run the same steps one after another (about 15 minutes).
SAN_TESTS=${SAN_TESTS:-"tests/engines/test_slc_engine.py tests/engines/test_dmv_engine.py tests/engines/test_w1x_wgrad.py
 tests/kernels/test_w1k_sum_batch.py tests/kernels/test_w1k_pixels_last.py tests/engines/test_tce_fp8.py
 tests/engines/test_tc_conv_engine.py tests/engines/test_wwg_engine.py tests/engines/test_mbe_norm_knobs.py
 tests/engines/test_mbe_softmax_knobs.py tests/engines/test_mbe_pointwise_waves.py tests/engines/test_pointwise_e2e.py
 tests/engines/test_eng_winograd.py tests/engines/test_eng_winograd_fused.py tests/kernels/test_conv_dgrad_phased.py
 tests/kernels/test_resample_direct.py tests/kernels/test_norm_bn_cols.py tests/kernels/test_norm_bn_planes.py
 tests/engines/test_eng_rng.py tests/engines/test_eng_conv.py"}
export SAN_TESTS
# the commit the tree was sent at (write it before the call: git rev-parse HEAD > .gpustate/commit)
[ -f .gpustate/commit ] && export NCUDNN_GIT_COMMIT=$(cat .gpustate/commit)
JOB0='export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0
  timeout ${BENCH0_TIMEOUT:-320} python3 -m ncudnn bench --shard 0/2 --overhead --no-charts --max-minutes ${BENCH0_MINUTES:-3.9} --out $OUT/full0 > $OUT/bench0.log 2>&1
  echo "bench shard 0 rc $?" >> $OUT/summary.txt; tail -n 4 $OUT/bench0.log >> $OUT/summary.txt
  PAR=14 SUITE_TIMEOUT=${SAN_SUITE_TIMEOUT:-100} SANITIZER_TIMEOUT=100 SANITIZER_TESTS="$SAN_TESTS" bash tools/gpu_par_sanitize.sh
  timeout ${TUNE_TIMEOUT:-90} python3 -m ncudnn bench --quick --tune --no-charts --max-minutes ${TUNE_MINUTES:-1.1} \
    --out $OUT/quick_tune > $OUT/tune.log 2>&1; echo "quick --tune rc $?" >> $OUT/summary.txt'
JOB1='export PYTHONPATH=/tmp/site:$PWD NUMBA_ENABLE_CUDASIM=0
  timeout 60 python3 bench/bench_ranking.py --reps 15 > $OUT/ranking.log 2>&1; tail -n 14 $OUT/ranking.log >> $OUT/summary.txt
  timeout ${BENCH1_TIMEOUT:-300} python3 -m ncudnn bench --shard 1/2 --no-charts --max-minutes ${BENCH1_MINUTES:-4.4} --out $OUT/full1 > $OUT/bench1.log 2>&1
  echo "bench shard 1 rc $?" >> $OUT/summary.txt; tail -n 4 $OUT/bench1.log >> $OUT/summary.txt
  PAR=14 SUITE_TIMEOUT=${TEST_SUITE_TIMEOUT:-250} FILE_TIMEOUT=250 TIMEOUT_ARG=--timeout=240 bash tools/gpu_par_tests.sh'
export JOB0 JOB1
bash tools/gpu_x2.sh
