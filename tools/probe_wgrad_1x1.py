"""``tools/probe_conv.py --mode wgrad1x1`` under its former name (the commands in docs/perf_notes.md):
the FP32 weight gradient of ResNet-50 1x1 layers, NCHW and NHWC, conv_gemm_1x1 beside torch.

    python3 tools/probe_wgrad_1x1.py [--layers ...] [--layouts nhwc nchw] [--top 3]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from probe_conv import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[1:1] = ["--mode", "wgrad1x1"]
    main()
