"""numba.cuda kernels and kernel factories: compile-time tile sizes via closures, launch helpers.
Imports nothing of ncudnn above this layer (numba and numpy only)."""
