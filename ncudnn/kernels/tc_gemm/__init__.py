"""Tensor-core GEMM (BF16 / FP16 in, f32 accumulate, BF16 / FP16 / F32 out) on mma.sync m16n8k16.

config (knobs, CONFIGS, check / keep, the shared-tile swizzle), kernel (the generated block kernel: cp.async
ring, swizzled shared tiles, ldmatrix fragments, mma.sync), conv_gather (the implicit-GEMM conv A loads),
epilogue_source (the fused epilogue's arguments and source), launch (``run_tc_gemm``), cases (sm_90
compile-check registration). Intrinsics: ncudnn/kernels/primitives/ptx.py; their simulator fallbacks: primitives/ptx_sim.py.

Kernel versions:
  v1  cp.async.cg 16-byte zero-fill loads into a STAGES-deep ring, XOR-swizzled 16-byte chunks,
      ldmatrix.x4 (.trans for m- / n-contiguous operands), serpentine mma order, scalar epilogue.
  v2  (same mainloop) fused variant: two batch dims, the shared epilogue (kernels/pointwise/epilogue.py: alpha /
      beta, bias, pointwise chain, residual) per accumulator; the engine matmul_tc runs it.
  v3  (cfg.VERSION = 3) 32-bit shared-window byte addresses (``ptx.*_a`` intrinsics: one add per
      cp.async / ldmatrix instead of 64-bit pointer math and a cvta each), write / read stage addresses
      rolled instead of ``kt % STAGES``, one compare per load slot for the k bound. sm_90 SASS of the
      128x128x32 w2x2 mainloop: 433 -> 214 instructions a k tile (64 HMMA), 252 -> 244 registers.
  v4  (conv only; needs C % BLOCK_K == 0) v3 with a one-tap gather: every k tile lies in one filter tap,
      so the tap (r, s, channel block) and its global offset are one running state per thread, and each
      A slot keeps only its pixel's corner, validity and base offset (no per-slot carry loop).
"""
from .config import CONFIGS, TcGemmConfig, check, keep, smem_bytes  # noqa: F401
from .epilogue_source import FUSED_ARGS  # noqa: F401
from .kernel import TcGemmKernel, make_tc_gemm  # noqa: F401
from .launch import (check_fused, check_problem, fused_args, fused_grid, run_tc_gemm,  # noqa: F401
                     tc_gemm_grid)
