"""The kernel layer's runtime: direct launches (launch, launch_args, launch_sim), the kernel cache
(kcache, cubin), the GPU-free compile check (compile_check), dtype loads / stores in registers (dtypes)
and element pointers for intrinsics (llvm_ptr)."""
