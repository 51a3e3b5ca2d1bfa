"""Pointwise kernels: every cudnnPointwiseMode_t as source text (ops), the runtime-fused pointwise DAG
kernel (fused: build and launch; spec: its description and layout analysis; codegen: its source text;
vector_io: the converters and vector loads / stores generated kernels call), the compile-time epilogues of
the GEMM / conv kernels (epilogue) and the row-vector loads of generated row kernels (vector_rows)."""
