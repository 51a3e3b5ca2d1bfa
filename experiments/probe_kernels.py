"""GPU probe: which kernels each implementation of a bench case launches (torch.profiler), with grid, block,
registers, shared memory and the median GPU time of each kernel over a few flushed runs.

    python3 experiments/probe_kernels.py                                  # the #4 norm cases
    python3 experiments/probe_kernels.py norm/layernorm_fwd/8192x1024/float32   # case ids (bench/cases.py by_id)

Implementations: ncudnn (the bench's pygraph plan), torch, cudnn-fe (bench/ref_runners.py), each prepared as
the bench does on the same inputs. Use it to read a reference's launch geometry (how many kernels, how big a
grid) before changing ours.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DEFAULT = ("norm/batchnorm_bwd/n32c256h56_nhwc/float32", "norm/layernorm_fwd/8192x1024/float32",
           "norm/rmsnorm_fwd/8192x1024/float32")
RUNS = 5


def main(argv=None):
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench import cases, data, ncudnn_runners, ref_runners

    ids = list(argv if argv is not None else sys.argv[1:]) or list(DEFAULT)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for cid in ids:
        case = cases.by_id(cid)
        inputs = data.torch_inputs(case)
        print(f"== {cid}", flush=True)
        for impl in ncudnn_runners.impls(case, inputs, True) + ref_runners.impls(case, inputs):
            try:
                p = impl.prepare()
            except Exception as e:
                print(f"  {impl.name}: not run ({type(e).__name__}: {str(e)[:120]})")
                continue
            p.fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(RUNS):
                    flush.zero_()
                    p.fn()
                torch.cuda.synchronize()
            kern = {}
            for ev in prof.events():
                if ev.device_type.name != "CUDA" or "elementwise_kernel" in ev.name and "FillFunctor" in ev.name:
                    continue
                kern.setdefault(ev.name, []).append(ev.device_time_total if hasattr(ev, "device_time_total")
                                                    else ev.cuda_time_total)
            print(f"  {impl.name}: {p.detail[:100]}")
            for name, ts in kern.items():
                print(f"    {len(ts)}x {statistics.median(ts):8.1f} us  {name[:150]}")
            _geometry(prof)


def _geometry(prof):
    """Grid / block / registers / shared memory of each kernel from the profiler's trace (when it has them)."""
    import json
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    seen = set()
    for ev in trace.get("traceEvents", []):
        a = ev.get("args", {})
        if ev.get("cat") != "kernel" or ev["name"] in seen:
            continue
        seen.add(ev["name"])
        print(f"      {ev['name'][:80]}: grid {a.get('grid')} block {a.get('block')} regs "
              f"{a.get('registers per thread')} smem {a.get('shared memory')} "
              f"blocks/SM {a.get('blocks per SM')} occupancy {a.get('est. achieved occupancy %')}")


if __name__ == "__main__":
    main()
