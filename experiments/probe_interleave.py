"""GPU probe: the bench's own implementations of a case (bench.ncudnn_runners / bench.ref_runners, prepared once)
timed by the bench's own loop (bench.timing.measure: L2 flush, CUDA events, median) in ROUNDS alternating rounds,
so drift between the implementations' turns (clocks, the L2 state another case left) shows as spread instead of
as a difference. Prints each round's medians and ncudnn / reference ratios, then the median over rounds.

    python3 experiments/probe_interleave.py                                   # the 8192x1024 LN / RMS forward cases
    python3 experiments/probe_interleave.py --rounds 8 norm/rmsnorm_fwd/8192x1024/float32
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DEFAULT = ("norm/layernorm_fwd/8192x1024/float32", "norm/rmsnorm_fwd/8192x1024/float32")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", default=list(DEFAULT))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--budget", type=float, default=0.06, help="timed seconds per implementation and round")
    args = ap.parse_args(argv)
    import torch

    from bench import cases, data, ncudnn_runners, ref_runners
    from bench.timing import TorchClock, measure

    clock = TorchClock()
    print(f"device {torch.cuda.get_device_name()}; {args.rounds} rounds, {args.budget} s timed an implementation "
          f"a round (bench.timing.measure)", flush=True)
    for cid in args.cases:
        case = cases.by_id(cid)
        inputs = data.torch_inputs(case)
        preps = {}
        for impl in ncudnn_runners.impls(case, inputs, True) + ref_runners.impls(case, inputs):
            try:
                p = impl.prepare()
                p.fn()
                preps[impl.name] = p
            except Exception as e:      # a reference that cannot run here is reported, not fatal
                print(f"  {impl.name}: not run ({type(e).__name__}: {str(e)[:100]})")
        torch.cuda.synchronize()
        names = list(preps)
        per = {n: [] for n in names}
        print(f"== {cid}: {', '.join(names)}", flush=True)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                per[n].append(measure(preps[n].fn, clock, args.budget, 3, 5, 200).median_ms)
            line = "  ".join(f"{n} {per[n][-1]:.4f}" for n in names)
            ratios = "  ".join(f"{n}/ncudnn {per[n][-1] / per['ncudnn'][-1]:.3f}" for n in names if n != "ncudnn")
            print(f"  round {r} ({'forward' if r % 2 == 0 else 'reversed'}): {line}  |  {ratios}", flush=True)
        med = {n: statistics.median(v) for n, v in per.items()}
        print("  median over rounds: " + "  ".join(f"{n} {m:.4f}" for n, m in med.items()) + "  |  " +
              "  ".join(f"{n}/ncudnn {med[n] / med['ncudnn']:.3f}" for n in names if n != "ncudnn"), flush=True)


if __name__ == "__main__":
    main()
