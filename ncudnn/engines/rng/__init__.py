"""The Philox RNG engine (philox). Kernels: ncudnn.kernels.rng."""
