"""The reference package's public surface: every export resolves and nothing ncudnn-internal leaks in."""
import ast
import pathlib

import ncudnn.reference as R

PKG = pathlib.Path(R.__file__).parent


def test_all_exports_resolve():
    assert len(R.__all__) == len(set(R.__all__))
    for name in R.__all__:
        assert callable(getattr(R, name)) or name in ("POINTWISE_ARITY", "SUPPORTED_OPS"), name


def test_imports_only_numpy_ml_dtypes_and_types():
    allowed = {"numpy", "ml_dtypes", "math", "fractions"}
    for f in PKG.glob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name.split(".")[0] in allowed, (f.name, a.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert node.module.split(".")[0] in allowed, (f.name, node.module)
                elif node.level == 2:
                    assert node.module == "types", (f.name, node.module)  # ..types only
