"""16-byte global loads and stores of four float32 with the streaming cache hint (``.cs``: evict-first
in L1 and L2), for the last touch of data in the batch-norm apply passes: the bytes they move then
leave the L2 before the lines the statistics pass read last, which the apply pass re-reads first.

``ld4cs(arr, i)`` returns ``(arr[i], ..., arr[i + 3])`` as one ``ld.global.cs.v4.f32``;
``st4cs(arr, i, a, b, c, d)`` writes them as one ``st.global.cs.v4.f32``. The caller guarantees
``i % 4 == 0`` and a 16-byte aligned base. Under the CUDA simulator: four plain reads / writes.
"""
from ...platform import simulator_enabled

__all__ = ["ld4cs", "st4cs"]

if simulator_enabled():
    # no cache hints in the simulator: the plain 16-byte access's fallback (four reads / writes, offset checked)
    from .vec import ld4 as ld4cs, st4 as st4cs  # noqa: F401
else:
    from .l2hint import ld4_asm, st4_asm

    ld4cs = ld4_asm("ld.global.cs.v4.f32 {$0, $1, $2, $3}, [$4];")
    st4cs = st4_asm("st.global.cs.v4.f32 [$0], {$1, $2, $3, $4};")
