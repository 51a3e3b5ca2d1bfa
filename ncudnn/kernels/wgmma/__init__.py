"""Hopper warpgroup MMA (``wgmma.mma_async``, sm_90a): PTX intrinsics and their simulator model
(:mod:`.ptx`), shared-memory descriptors and layouts (:mod:`.layout`), the GEMM kernel factory
(:mod:`.kernel`) and its launcher (:mod:`.launch`); its timing script is experiments/wgmma_timing.py."""
