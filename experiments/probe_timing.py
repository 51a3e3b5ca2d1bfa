"""The CUDA-event timing loop the probe scripts share (experiments/probe_*.py import it; they run as scripts, so
this directory is on sys.path)."""
import statistics


def flushed_median_ms(fn, torch, flush, reps):
    """Median milliseconds of ``fn`` over ``reps`` CUDA-event timed runs (two warm-up runs first), the L2
    flushed before each by zeroing ``flush`` (a torch tensor larger than the L2)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    E = torch.cuda.Event
    pairs = []
    for _ in range(reps):
        flush.zero_()
        a, b = E(enable_timing=True), E(enable_timing=True)
        a.record()
        fn()
        b.record()
        pairs.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in pairs)
