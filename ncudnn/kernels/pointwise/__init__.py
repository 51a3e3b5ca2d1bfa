"""Pointwise kernels: every cudnnPointwiseMode_t as source text (ops), the runtime-fused pointwise DAG
kernel (fused), the compile-time epilogues of the GEMM / conv kernels (epilogue) and the row-vector
loads of generated row kernels (vector_rows)."""
