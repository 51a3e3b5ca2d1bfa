"""ncudnn benchmarks beside cuDNN, cuBLAS and torch: see bench/README.md."""
