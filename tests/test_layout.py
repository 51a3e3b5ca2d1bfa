"""The package's structure is visible from its paths: only the engine layer's core sits at
ncudnn/engines/, every engine lives in a family folder, ncudnn/kernels/ holds nothing but folders, and an
engine family's kernels are found under the same name in ncudnn/kernels/."""
from pathlib import Path

import ncudnn
from ncudnn.engines import registry

PKG = Path(ncudnn.__file__).parent
ENGINES, KERNELS = PKG / "engines", PKG / "kernels"

#: the engine layer's core: the only modules at ncudnn/engines/ itself
ENGINE_CORE = {"__init__", "api", "autotune", "base", "buffers", "composite", "cudagraph", "device", "heuristics",
               "plan", "plancache", "ranking", "registry", "serialize"}
#: kernel folders that are no op family: the launch path and caches, the device primitives
KERNEL_INFRASTRUCTURE = {"runtime", "primitives"}
#: kernel folders an engine family runs besides (or instead of) the one of its own name
KERNELS_OF = {"conv": {"conv", "gemm", "tc_conv", "tc_gemm"}, "matmul": {"gemm", "tc_gemm", "wgmma"},
              "gemm": {"gemm", "tc_gemm"}}
#: engine folders of shared machinery with no kernels of their own
NO_KERNELS = {"membound"}


def _modules(d):
    return {p.stem for p in d.glob("*.py")}


def _packages(d):
    return {p.parent.name for p in d.glob("*/__init__.py")}


def test_only_the_core_is_flat_in_engines():
    flat = _modules(ENGINES) - ENGINE_CORE
    assert not flat, f"engine modules outside a family folder: {sorted(flat)}"


def test_no_kernel_module_is_flat():
    flat = _modules(KERNELS) - {"__init__", "__main__"}
    assert not flat, f"kernel modules outside a family folder: {sorted(flat)}"


def test_engine_families_find_their_kernels_by_name():
    kernel_dirs = _packages(KERNELS)
    for family in sorted(_packages(ENGINES) - NO_KERNELS):
        wanted = KERNELS_OF.get(family, {family})
        assert wanted <= kernel_dirs, f"engines/{family}/: no kernels/{sorted(wanted - kernel_dirs)}"
    claimed = set().union(_packages(ENGINES), *KERNELS_OF.values())
    unclaimed = kernel_dirs - claimed - KERNEL_INFRASTRUCTURE
    assert not unclaimed, f"kernel folders no engine family names: {sorted(unclaimed)}"


def test_every_engine_lives_in_a_family_folder():
    for engine in registry.engines():
        module = type(engine).__module__
        if engine.name == "composite":
            assert module == "ncudnn.engines.composite"
            continue
        parts = module.split(".")
        assert len(parts) == 4 and parts[:2] == ["ncudnn", "engines"], (engine.name, module)
        assert parts[2] in _packages(ENGINES) - NO_KERNELS, (engine.name, module)


#: the package line budget (issue #22): no module over this many lines but the generated types.py
MAX_LINES = 600


def test_no_package_module_over_the_line_budget():
    pkg = Path(ncudnn.__file__).parent
    over = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel == "types.py":
            continue
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            over[rel] = n
    assert not over, f"modules over {MAX_LINES} lines (split them along a seam): {over}"
