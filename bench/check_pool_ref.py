"""The average-pool backward references at the benchmark shape, checked and timed side by side.

For ``pool/avg_pool_bwd/3x3s2_n32c256h112_{nhwc,nchw}`` (N32 C256 112x112, 3x3, stride 2, pad 1) it runs,
through the bench harness (NaN-poisoned outputs, float64 truth, CUDA events on a cold L2):

* ``ncudnn`` and the bench's ``torch`` reference (:func:`bench.ref_runners.avg_pool_bwd`: for channels-last
  with padding, torch's pad-0 kernel on the padded shape, then the interior);
* ``torch-aten-direct``: ``aten.avg_pool2d_backward`` called directly with the padding (what the bench
  used before; wrong for channels-last in torch <= 2.11, pytorch/pytorch#188344);
* ``cudnn-fe`` when nvidia-cudnn-frontend builds the graph.

Prints one line per implementation: status, relative error against the float64 truth, median time.

    python bench/check_pool_ref.py [--layouts nhwc,nchw] [--budget 0.06]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", default="nhwc,nchw")
    ap.add_argument("--budget", type=float, default=0.06, help="timed seconds per implementation")
    args = ap.parse_args(argv)
    from bench import cases as C
    from bench import data, ref_runners
    from bench.harness import Impl, Prepared, run_case
    from bench.suite import case_setup, detect
    from bench.timing import make_clock

    env = detect()
    if not env.torch_ok:
        print("SKIP check_pool_ref: needs a GPU and torch (" + "; ".join(env.missing) + ")")
        return 0
    import torch

    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    clock = make_clock(True, False)
    for lay in args.layouts.split(","):
        case = C.by_id(f"pool/avg_pool_bwd/3x3s2_n32c256h112_{lay}/float32")
        impls, truth_fn, compare, keep = case_setup(case, env)
        p = case.params

        def direct(case=case, keep=keep, p=p):
            def prepare():
                dy = keep["dy"]
                xe = torch.empty(data.specs(case)[1]["dx"].dims, device="cuda", dtype=dy.dtype,
                                 memory_format=ref_runners._fmt(dy))
                back = torch.ops.aten.avg_pool2d_backward
                k, s, pd = [p["r"]] * 2, [p["stride"]] * 2, [p["pad"]] * 2
                holder = {}

                def run():
                    holder["dx"] = back(dy, xe, k, s, pd, False, True, None)
                return Prepared(run, lambda: {"dx": holder["dx"]}, "float32", "aten.avg_pool2d_backward, padded")
            return prepare
        impls.append(Impl("torch-aten-direct", "reference", direct()))
        print(f"== {case.id}  ({case.bytes / 1e6:.1f} MB ideal traffic)")
        rows = run_case(case, impls, truth_fn, compare, clock, (args.budget, 2, 5, 100), log=None)
        for r in rows:
            err = max((r.get("rel_err") or {}).values(), default=float("nan"))
            t = f"{r['median_ms']:.4f} ms {r['gbps']:7.0f} GB/s" if "median_ms" in r else "-"
            print(f"  {r['impl']:20s} {r['status']:14s} rel_err {err:.3e}  {t}  {r.get('reason', '')[:120]}")
        del impls, keep
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
