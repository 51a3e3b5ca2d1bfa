"""Winograd F(m x m, 3 x 3) convolution pieces: exact transform matrices (transforms), the filter /
input / output transform kernels (kernels), sm_90 compile-check registrations (cases)."""
