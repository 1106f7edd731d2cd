"""No import cycle among josh's modules, counting imports inside functions (the layers between packages are
import-linter's contract in pyproject.toml, run by ``make lint`` and ``make test``)."""

import ast
import re
import sys
from functools import lru_cache
from pathlib import Path

import josh

PACKAGE = Path(josh.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Every josh module and the josh modules it imports anywhere in its body."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.append(node.module)
                targets += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@lru_cache(maxsize=1)
def josh_graph() -> dict[str, set[str]]:
    """josh's own import graph, read once for the tests of this module."""
    return import_graph(PACKAGE)


def test_no_import_cycle_among_josh_modules() -> None:
    assert cycles(josh_graph()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_local_import(tmp_path: Path) -> None:
    package = tmp_path / "josh"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from josh.b import f\n")
    (package / "b.py").write_text("def f():\n    from josh.c import g\n")
    (package / "c.py").write_text("import josh.a\n")
    (package / "d.py").write_text("import josh.a\n")
    assert cycles(import_graph(package)) == [["josh.a", "josh.b", "josh.c"]]


SIBLINGS = (("josh.envs", "josh.agents", "josh.users", "josh.llm"), ("josh.eval", "josh.harvest", "josh.training"))


def test_sibling_packages_never_import_each_other_and_the_contract_says_so() -> None:
    """Issue 49's target: 0 imports between the component packages, and between the stages (function-local ones
    included); the layer contract declares them independent (``|``) so ``lint-imports`` keeps it at 0."""
    import tomllib

    layers = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    for group in SIBLINGS:
        assert " | ".join(group) in layers["layers"]
    graph = josh_graph()
    crossing = sorted(
        f"{source} -> {target}"
        for group in SIBLINGS
        for source, targets in graph.items()
        for target in targets
        for a in group
        for b in group
        if a != b and (source == a or source.startswith(a + ".")) and (target == b or target.startswith(b + "."))
    )
    assert crossing == []


REASON = re.compile(r"#\s*(optional|heavy|cycle): \S")


def deferred_imports(root: Path) -> list[tuple[str, int, str, str]]:
    """(file, line, imported module, the import's first line) of every import inside a function under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for function in ast.walk(ast.parse(text)):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom):
                        module = node.module or ""
                    elif isinstance(node, ast.Import):
                        module = node.names[0].name
                    else:
                        continue
                    found.append(
                        (path.relative_to(root.parent).as_posix(), node.lineno, module, lines[node.lineno - 1])
                    )
    return sorted(set(found))


def unexplained(imports: list[tuple[str, int, str, str]]) -> list[str]:
    """The deferred imports that import the standard library or do not say why they wait."""
    return [
        f"{path}:{line}: {text.strip()}"
        for path, line, module, text in imports
        if module.split(".")[0] in sys.stdlib_module_names or not REASON.search(text)
    ]


def test_every_import_inside_a_function_says_why_it_waits() -> None:
    """Issue 64: an import waits inside a function only for an optional dependency, a heavy module a command may not
    need, or an import cycle, and its comment says which (``# optional: …``, ``# heavy: …``, ``# cycle: …``)."""
    assert unexplained(deferred_imports(PACKAGE)) == []


def test_an_unexplained_or_standard_library_deferred_import_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "josh"
    package.mkdir()
    (package / "a.py").write_text(
        "import json\n\n\ndef f():\n    import torch  # optional: the train extra\n    import yaml\n\n\n"
        "def g():\n    import json  # heavy: json\n    from josh import b  # deferred: keeps it light\n"
    )
    assert unexplained(deferred_imports(package)) == [
        "josh/a.py:6: import yaml",
        "josh/a.py:10: import json  # heavy: json",
        "josh/a.py:11: from josh import b  # deferred: keeps it light",
    ]
