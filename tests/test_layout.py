"""The driver's layers, read from the source: each sub-package imports only the
ones below it, and the trainer leaves the kernels' internals to LpSVDD."""

import ast
from pathlib import Path

import dlmsvdd
import dlmsvdd_ext

PACKAGE = Path(dlmsvdd.__file__).parent
LAYERS = {"data": 0, "training": 1, "experiments": 2, "cli": 3, "__main__": 3}


def _imports(path: Path) -> list[str]:
    """Absolute names of every module imported by ``path`` (relative ones resolved)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    here = parts[:-1]  # the package that holds the module
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(here[: len(here) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 and parts[0] == "dlmsvdd" else None


def test_only_init_and_cli_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"]


def test_each_layer_imports_only_those_below():
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue  # the package's face re-exports from the layers
        own = _layer(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        for name in _imports(path):
            target = _layer(name)
            assert target is None or target <= own, f"{path.relative_to(PACKAGE)} imports {name}"


def test_the_trainer_leaves_the_kernels_to_lpsvdd():
    names = _imports(PACKAGE / "training" / "trainer.py")
    assert not [n for n in names if n.startswith(("dlmsvdd_ext.ops", "dlmsvdd_ext.distributed"))]
    assert "median_sq_distance" not in (PACKAGE / "training" / "trainer.py").read_text()  # no bandwidth rule


def test_one_owner_per_boundary_decision():
    """The median rule, the landmark budget and the apg-to-pairwise switch are
    each written in one place of the source tree."""
    import dlmsvdd_ext

    sources = list(Path(dlmsvdd_ext.__file__).parent.glob("*.py")) + list(PACKAGE.rglob("*.py"))
    texts = {p: p.read_text() for p in sources}

    def holders(snippet):
        return sorted(p.name for p, t in texts.items() if snippet in t)

    assert holders("scale / median_sq") == ["svdd.py"]  # the median rule, "local" its multiple
    assert holders("def max_components(") == ["kernels.py"]
    assert holders('distributed.METHODS else "pairwise"') == ["svdd.py"]


def _extension_graph() -> dict[str, set[str]]:
    """dlmsvdd_ext's module -> the sibling modules it imports, anywhere in its source (an import
    inside a function included: that is how a circle hides)."""
    ext = Path(dlmsvdd_ext.__file__).parent
    modules = {p.stem for p in ext.glob("*.py")} - {"__init__"}
    graph = {}
    for name in modules:
        found = set()
        for node in ast.walk(ast.parse((ext / f"{name}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found |= {node.module} if node.module else {alias.name for alias in node.names}
        graph[name] = found & modules
    return graph


def test_the_extension_modules_import_without_a_circle():
    # issue 25: dual -> params -> solver -> dual was hidden by an import inside a function
    graph = _extension_graph()
    assert "params" in graph["dual"] and "params" in graph["solver"]  # the reader sees every import
    done, path = set(), []

    def visit(module):
        assert module not in path, f"import circle: {' -> '.join(path[path.index(module):] + [module])}"
        if module in done:
            return
        path.append(module)
        for dep in sorted(graph[module]):
            visit(dep)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_no_class_defines_a_method_twice():
    # the second definition silently replaces the first (issue 25: LowRankKernel.diagonal's row-by-row
    # einsum was overridden by a version that made an N x m temporary)
    for package in (Path(dlmsvdd.__file__).parent, Path(dlmsvdd_ext.__file__).parent):
        for path in package.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    names = [f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                             and not any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
                                         for d in f.decorator_list)]
                    twice = sorted({n for n in names if names.count(n) > 1})
                    assert not twice, f"{path.name}: class {node.name} defines {twice} twice"
