"""Counter-based random numbers: Philox4x32-10 (philox)."""
