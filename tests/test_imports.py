"""The project's import graph (issue 24): no cycle among the modules of tuner/ (with
tuner/families/), indexer_logits/ (without its generated tables/), commands/ and cli.py,
and no import of a
project module inside a function (a function-level import is how a cycle hides). Imports of
third-party modules inside functions are allowed (optuna storages, tqdm, torch on a CLI-only
path: they keep `import tuner.x` light).

Reads the code with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tuner", "indexer_logits", "commands")
SKIPPED = (ROOT / "indexer_logits" / "tables",)  # generated kernel modules and dispatch tables


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every project module the rules cover."""
    out = {}
    for package in PACKAGES:
        if not (root / package).is_dir():
            continue
        for path in sorted((root / package).rglob("*.py")):
            if any(path.is_relative_to(root / s.relative_to(ROOT)) for s in SKIPPED) or "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    if (root / "cli.py").is_file():
        out["cli"] = root / "cli.py"
    return out


def _is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES + ("cli",)


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative imports resolved against `module`)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import in the file. `from X
    import Y` counts as an import of X.Y where X.Y is a module, else of X."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if _is_project(alias.name):
                        out.append((alias.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, path, child)
                if _is_project(base):
                    names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in child.names]
                    out.extend((name, child.lineno, in_function) for name in dict.fromkeys(names))
            visit(child, inner)

    visit(tree, False)
    return out


def import_graph(files: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """({module: project modules it imports}, ["file:line: module imports X inside a function"])."""
    known = set(files)
    graph: dict[str, set[str]] = {m: set() for m in files}
    nested = []
    for module, path in files.items():
        for name, line, in_function in imports(module, path, known):
            target = name
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if in_function:
                nested.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name} inside a function")
            if target and target != module:
                graph[module].add(target)
    return graph, nested


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        state[start] = 1
        stack = [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_rules_cover_the_project():
    files = module_files()
    for name in ("cli", "commands.tuning", "tuner.tune", "tuner.search", "tuner.families", "indexer_logits._identity"):
        assert name in files, name
    assert not any(m.startswith("indexer_logits.tables") for m in files)


def test_no_import_cycle():
    graph, _ = import_graph(module_files())
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_project_import_inside_a_function():
    _, nested = import_graph(module_files())
    assert not nested, "project modules imported inside functions:\n" + "\n".join(nested)


def test_the_checker_sees_a_cycle_and_a_nested_import(tmp_path):
    """The checker itself, on a small made-up project: relative imports, `from X import Y` with
    X.Y a module, and a nested import."""
    (tmp_path / "tuner" / "sub").mkdir(parents=True)
    (tmp_path / "indexer_logits").mkdir()
    (tmp_path / "tuner" / "__init__.py").write_text("")
    (tmp_path / "tuner" / "sub" / "__init__.py").write_text("from .. import a\n")
    (tmp_path / "tuner" / "a.py").write_text("from . import b\n")
    (tmp_path / "tuner" / "b.py").write_text("import os\n\ndef f():\n    from tuner.sub import __name__\n")
    (tmp_path / "indexer_logits" / "__init__.py").write_text("")
    (tmp_path / "cli.py").write_text("def main():\n    import optuna\n")
    files = module_files(tmp_path)
    known = set(files)
    assert imports("tuner.sub", files["tuner.sub"], known) == [("tuner.a", 1, False)]
    graph = {m: set() for m in files}
    for module, path in files.items():
        for name, _, _ in imports(module, path, known):
            if name != module:
                graph[module].add(name)
    assert find_cycle(graph) == ["tuner.a", "tuner.b", "tuner.sub", "tuner.a"]
    nested = [(m, line) for m, p in files.items() for _, line, inside in imports(m, p, known) if inside]
    assert nested == [("tuner.b", 4)]
