"""The seed tutorial's graph (conv_fprop -> bias -> relu, N32 C128 -> K256 56x56, 3x3 pad 1, channels-last
FP32) built with the SAME pygraph code for ncudnn and for real cuDNN (nvidia-cudnn-frontend, when
importable), run on torch tensors, checked against torch, timed with CUDA events (median of 20 after
warm-up). Usage on the GPU machine: python3 tools/seed_tutorial_timing.py [N C K H]."""
import statistics
import sys
import time

import torch


def build(mod, handle, x, w, b):
    g = mod.pygraph(io_data_type=mod.data_type.FLOAT, intermediate_data_type=mod.data_type.FLOAT,
                    compute_data_type=mod.data_type.FLOAT, handle=handle)
    X, W, B = g.tensor_like(x), g.tensor_like(w), g.tensor_like(b)
    c = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    y = g.relu(input=g.bias(input=c, bias=B))
    y.set_output(True).set_data_type(mod.data_type.FLOAT)
    t0 = time.perf_counter()
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([mod.heur_mode.A, mod.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(mod.build_plan_policy.HEURISTICS_CHOICE)
    return g, X, W, B, y, (time.perf_counter() - t0) * 1e3


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def main():
    n, c, k, h = (int(v) for v in (sys.argv[1:5] or (32, 128, 256, 56)))
    torch.backends.cudnn.allow_tf32 = False
    x = torch.randn(n, c, h, h, device="cuda").to(memory_format=torch.channels_last)
    w = torch.randn(k, c, 3, 3, device="cuda").to(memory_format=torch.channels_last) * 0.05
    b = torch.randn(1, k, 1, 1, device="cuda")
    ref = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), padding=1) + b.double())
    flops = 2.0 * n * k * h * h * c * 9
    rows = []
    for name in ("ncudnn", "cudnn"):
        try:
            mod = __import__(name)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: not importable ({e})")
            continue
        handle = mod.create_handle()
        g, X, W, B, Y, build_ms = build(mod, handle, x, w, b)
        out = torch.full((n, k, h, h), float("nan"), device="cuda").to(memory_format=torch.channels_last)
        ws = torch.empty(max(g.get_workspace_size(), 1), device="cuda", dtype=torch.uint8)
        pack = {X: x, W: w, B: b, Y: out}
        run = lambda: g.execute(pack, ws, handle=handle)  # noqa: E731
        run(); torch.cuda.synchronize()
        err = float((out.double() - ref).norm() / ref.norm())
        ms = median_ms(run)
        rows.append((name, ms, err, build_ms))
    torch_fn = lambda: torch.relu(torch.nn.functional.conv2d(x, w, padding=1) + b)  # noqa: E731
    ms_t = median_ms(torch_fn)
    err_t = float((torch_fn().double() - ref).norm() / ref.norm())
    rows.append(("torch (cuDNN, TF32 off, unfused)", ms_t, err_t, 0.0))
    print(f"seed tutorial graph conv+bias+relu N{n} C{c}->K{k} {h}x{h} 3x3 FP32 NHWC on {torch.cuda.get_device_name()}")
    for name, ms, err, bms in rows:
        print(f"  {name:34s} {ms:8.3f} ms  {flops / ms / 1e9:6.1f} TFLOP/s  rel_err {err:.1e}  plan build {bms:.0f} ms")


if __name__ == "__main__":
    main()
