"""Device primitives every kernel family uses: warp / block reductions and bit casts (warp), tensor-core
and async-copy PTX intrinsics (ptx) with their simulator fallbacks (ptx_sim), the inline grid
barrier (grid_sync), plain 16-byte accesses and a branch-free select (vec) and 16-byte accesses with cache hints
(l2hint, cshint)."""
