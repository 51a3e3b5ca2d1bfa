"""Register-blocked SIMT GEMM: config (knobs, config list, keep), mainloop (the block kernel shared
with implicit-GEMM conv), operands (strided loaders), splitk (reduce / prescale), launch (block
kernels + split-K launch sequence), gemm (factory and launcher), vec (16-byte shared / global
accesses), fastloop (the fast fp32 block kernel), cases (compile-check registration).

Mainloop versions (all still selectable through knobs):
  v1  VEC=1: interleaved 8x8 thread tile, scalar shared fragment loads, register-prefetched
      double-buffered shared tiles (STAGES=2), k loop UNROLL_K steps per trip.
  v2  VEC=4: 4-row / 4-column fragment groups read with ld.shared.v4 (4x fewer shared loads).
  v3  unsigned element indices everywhere in the mainloop (no negative-index fix-ups) and
      accumulator staging for big epilogues (mainloop accumulators stay in registers).
  v4  MAINLOOP="fast" (fastloop.py, strided fp32 A/B): 16-byte global quads into registers before
      the tile's FMAs, st.shared.v4 for outer-contiguous operands, every k-step written out, one
      64-bit address per quad advanced by a constant, no checks in the k loop (the host runs the
      generic kernel of the same tile when alignment / K % BLOCK_K does not hold); 128 registers
      spill-free -> 2 blocks of 256 threads per SM.
"""
from .config import CONFIGS, GemmConfig, check, keep  # noqa: F401
from .gemm import GemmKernel, make_gemm, run_gemm  # noqa: F401
