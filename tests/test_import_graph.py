"""The package's import graph, read statically from the source: no import cycle anywhere in ``ncudnn``, and the
front ends reach the engine layer through ``ncudnn.engines.api`` only (ARCHITECTURE.md, issue #22 item 5).

Every ``import`` / ``from ... import`` of every ``.py`` under ``ncudnn/`` counts, at module level and inside
functions alike (a function-local import that closes a cycle only moves the cycle to the first call); imports
under ``if TYPE_CHECKING:`` are left out (they never run), and so is everything outside ``ncudnn`` (torch, CuPy,
cuda-python, numba, ...). Relative imports are resolved; importing ``a.b.c`` also runs the ``__init__`` of
``a`` and ``a.b``, so those count as imported too (a module's own enclosing packages excepted: they are always
imported before it). The engine registry's discovery (``importlib.import_module`` over the family folders) is a
plugin load by name, not an import statement, and is not an edge.
"""
import ast
import textwrap
from pathlib import Path

PKG_DIR = Path(__file__).resolve().parents[1] / "ncudnn"

#: the front ends: translators into the IR that call the engine layer (ARCHITECTURE.md's layer table)
FRONT_ENDS = ("ncudnn.backend", "ncudnn.frontend", "ncudnn.legacy", "ncudnn.experimental")
#: what of the engine layer a front end may import: its one entry point (and the package that holds it)
ENGINE_ENTRY = {"ncudnn.engines", "ncudnn.engines.api"}


def modules(pkg_dir, pkg_name):
    """{module name: path} of every .py under ``pkg_dir`` (a package's ``__init__`` named as the package)."""
    out = {}
    for p in sorted(pkg_dir.rglob("*.py")):
        parts = [pkg_name] + list(p.relative_to(pkg_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree):
    """Every Import / ImportFrom node at any depth, except those under ``if TYPE_CHECKING:`` (its else runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imported(mod, path, node, mods):
    """Module names of the package that ``node`` (in module ``mod`` at ``path``) imports."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            src = ".".join(base + ([node.module] if node.module else []))
        else:
            src = node.module
        targets = [src] + [f"{src}.{a.name}" for a in node.names if f"{src}.{a.name}" in mods]
    out = set()
    for t in targets:
        parts = t.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c runs the __init__ of a and a.b too
            name = ".".join(parts[:i])
            if name in mods and name != mod and not mod.startswith(name + "."):
                out.add(name)
    return out


def import_graph(pkg_dir=PKG_DIR, pkg_name="ncudnn"):
    """{module: {imported module: first line importing it}} over the whole package."""
    mods = modules(pkg_dir, pkg_name)
    graph = {}
    for mod, path in mods.items():
        edges = graph.setdefault(mod, {})
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            for dep in _imported(mod, path, node, mods):
                edges[dep] = min(edges.get(dep, node.lineno), node.lineno)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def cycle_path(graph, comp):
    """One closed path through ``comp``, starting at its first module: [m0, m1, ..., m0] (shortest by BFS)."""
    members, start = set(comp), comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, v, start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


def describe(graph, mods, comp, pkg_dir=PKG_DIR):
    """The cycle as one closed path, each step with the file and line of its import."""
    path = cycle_path(graph, comp)
    steps = []
    for a, b in zip(path, path[1:]):
        steps.append(f"{a} -> {b} ({mods[a].relative_to(pkg_dir.parent)}:{graph[a][b]})")
    return f"import cycle of {len(comp)} modules ({', '.join(comp)}): " + "; ".join(steps)


def test_no_import_cycle():
    graph, mods = import_graph(), modules(PKG_DIR, "ncudnn")
    found = [describe(graph, mods, c) for c in cycles(graph)]
    assert not found, "\n".join(found)


def test_front_ends_reach_the_engine_layer_through_engines_api_only():
    graph = import_graph()
    bad = []
    for mod, deps in sorted(graph.items()):
        if not any(mod == f or mod.startswith(f + ".") for f in FRONT_ENDS):
            continue
        for dep, line in sorted(deps.items()):
            if dep.startswith("ncudnn.kernels") or (dep.startswith("ncudnn.engines") and dep not in ENGINE_ENTRY):
                bad.append(f"{mod} imports {dep} (line {line})")
    assert not bad, "front ends import the engine layer only through ncudnn.engines.api:\n" + "\n".join(bad)


def test_the_checker_sees_function_local_relative_and_package_imports(tmp_path):
    """The graph counts what the tests above rely on: an import inside a function closes a cycle, a relative
    import resolves, importing a submodule runs its package's __init__, TYPE_CHECKING imports do not count."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import thing\n",
        "pkg/b.py": "thing = 1\ndef f():\n    from . import a\n    return a\n",
        "pkg/sub/__init__.py": "from ..c import x\n",
        "pkg/sub/d.py": "",
        "pkg/c.py": "x = 1\ndef g():\n    import pkg.sub.d\n",
        "pkg/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .f import y\n",
        "pkg/f.py": "from .e import TYPE_CHECKING as y\n",
    }
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    graph = import_graph(tmp_path / "pkg", "pkg")
    assert graph["pkg.b"] == {"pkg.a": 3}
    assert set(graph["pkg.c"]) == {"pkg.sub", "pkg.sub.d"}
    assert graph["pkg.e"] == {}
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub"]]
    msg = describe(graph, modules(tmp_path / "pkg", "pkg"), ["pkg.a", "pkg.b"], tmp_path / "pkg")
    assert "pkg.a -> pkg.b (pkg/a.py:1); pkg.b -> pkg.a (pkg/b.py:3)" in msg
