"""The code's layout: imports go one way (callbacks -> pipeline -> parts -> config), no cycle, all documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.servers import ROOT

PACKAGES = ("app", "serving", "tools")
# Each module's layer; a module may import only from its own layer or a lower one.
LAYERS = {
    "app.config": 0,
    "app.errors": 0,
    "app.i18n": 0,
    "app.chainlit_seam": 0,
    "app.answering": 1,
    "app.coalesce": 1,
    "app.token_bound": 1,
    "app.stats": 1,
    "app.preferences": 1,
    "app.conversation": 1,
    "app.attachments": 1,
    "app.branches": 1,
    "app.backend": 1,
    "app.transport": 0,
    "app.session": 1,
    "app.history": 1,  # the package's modules, but for those below
    "app.history.service": 2,
    "app.history.users": 2,
    "app.origins": 2,
    "app.guards": 2,
    "app.readiness": 2,
    "app.metrics": 0,
    "app.shares": 2,
    "app.sharing": 2,
    "app.presets": 2,
    "app.uploads": 2,
    "app.web": 1,
    "app.web.protection": 2,
    "app.lifecycle": 2,
    "app.ui": 2,
    "app.pipeline": 3,
    "app.main": 4,
    "app.__main__": 4,
    "serving": 5,  # the server side reads the app's settings only
    "tools": 6,
}
# Folders the layout table names as a whole: Alembic's revisions and entry point.
NAMED_AS_A_FOLDER = ("app/history/migrations/",)
# What the server side and the tools may take from the app.
OUTSIDE_THE_APP = {"app.config"}


def module_name(path: Path) -> str:
    """The dotted name of a module file under the project root."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every Python module of the project's code, by dotted name."""
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def layer(module: str) -> int:
    """The layer of the longest entry of LAYERS that names the module or a package holding it."""
    holders = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    assert holders, f"{module} has no layer in tests/test_layout.py"
    return LAYERS[max(holders, key=len)]


def imports(path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports (a `from package import module` counts as the module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & known
            found |= submodules or ({node.module} & known)
    return found


def graph() -> dict[str, set[str]]:
    """Each module's imports of project modules."""
    found = modules()
    return {name: imports(path, set(found)) for name, path in found.items()}


def test_no_module_imports_from_a_higher_layer():
    upward = [
        f"{module} (layer {layer(module)}) imports {imported} (layer {layer(imported)})"
        for module, imported_modules in graph().items()
        for imported in imported_modules
        if layer(imported) > layer(module)
    ]
    assert upward == []


def test_the_server_side_and_the_tools_take_only_the_settings_from_the_app():
    taken = {
        f"{module} imports {imported}"
        for module, imported_modules in graph().items()
        if not module.startswith("app")
        for imported in imported_modules
        if imported.startswith("app") and imported not in OUTSIDE_THE_APP
    }
    assert taken == set()


def test_no_import_cycle():
    edges = graph()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str]:
        state[module] = "open"
        for imported in sorted(edges[module]):
            if state.get(imported) == "open":
                return [*path, module, imported]
            if imported not in state and (cycle := visit(imported, [*path, module])):
                return cycle
        state[module] = "done"
        return []

    cycles = [cycle for module in sorted(edges) if module not in state and (cycle := visit(module, []))]
    assert cycles == []


@pytest.mark.parametrize("module", sorted(modules()))
def test_the_readmes_layout_table_names_every_module(module):
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    named = set(re.findall(r"`([\w/.]+)`", layout))
    path = modules()[module].relative_to(ROOT).as_posix()
    if path.startswith(NAMED_AS_A_FOLDER):
        assert named & set(NAMED_AS_A_FOLDER)
    elif path.endswith("/__init__.py"):  # a package may be named by its folder
        assert {path, path.removesuffix("__init__.py")} & named, f"{path} is not in the README's layout table"
    else:
        assert path in named, f"{path} is not in the README's layout table"
