"""The engine layer: engines (pattern + knobs + notes + workspace + launcher), heuristics, autotuning,
plans and caches. Front ends call :mod:`ncudnn.engines.api`; engines call :mod:`ncudnn.kernels`."""
