"""CUDA-event timing shared by the tensor-core timing scripts (experiments/tc_gemm_timing.py,
experiments/tc_conv_timing.py, experiments/wgmma_timing.py; they run as scripts, so this directory is on
sys.path): one copy of the warm-up / event / median loop."""
import statistics


def median_seconds(go, iters, warmup=3):
    """Median seconds of ``go()`` over ``iters`` runs, each between two CUDA events recorded on the
    default stream, after ``warmup`` untimed runs and a device synchronize. Numba launches (stream 0)
    and torch ops (torch's default stream is the same legacy stream) are timed alike."""
    from numba import cuda

    for _ in range(warmup):
        go()
    cuda.synchronize()
    times = []
    for _ in range(iters):
        e0, e1 = cuda.event(), cuda.event()
        e0.record()
        go()
        e1.record()
        e1.synchronize()
        times.append(max(e0.elapsed_time(e1), 1e-6) / 1e3)
    return statistics.median(times)
