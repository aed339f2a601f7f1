"""The import graph of the packages, read from their source."""
import ast
from pathlib import Path

from tests.helpers import REPO

PACKAGES = ("minbert", "tasks", "bench")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, everywhere: bool = False) -> set:
    """Modules `path` imports when it is imported: module level, outside `if TYPE_CHECKING:`; with `everywhere`,
    every import statement (in functions and `if TYPE_CHECKING:` blocks too). Relative imports resolved;
    `from pkg import name` counts as importing pkg.name when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    statements = ast.walk(tree) if everywhere else module_level(tree.body)
    return {name for node in statements for name in imported(node, package)}


def module_level(nodes):
    """The statements run on import: `nodes`, and those inside their `if` and `try` blocks, less the blocks of
    `if TYPE_CHECKING:`."""
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try)):
            yield from module_level(node.body + node.orelse + getattr(node, "finalbody", []) +
                                    [n for h in getattr(node, "handlers", []) for n in h.body])
        else:
            yield node


def imported(node: ast.AST, package: str) -> set:
    """The modules an import statement names (none for another node); relative ones resolved within
    `package`."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
    return {base} | {f"{base}.{alias.name}" for alias in node.names}


def graph(root: Path = REPO, everywhere: bool = False) -> dict:
    modules = {module_name(p): p for package in PACKAGES for p in (root / package).rglob("*.py")}
    return {name: {m for m in runtime_imports(path, everywhere) if m in modules and m != name}
            for name, path in modules.items()}


def find_cycle(edges: dict):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def walk(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = walk(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = walk(node)
            if cycle:
                return cycle
    return None
