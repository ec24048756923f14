"""The code's layout: imports go one way (callbacks -> pipeline -> parts -> config), no cycle, all documented."""

from __future__ import annotations

import ast
import functools
import gc
import re
from pathlib import Path

import pytest

from tests.support.servers import ROOT

PACKAGES = ("app", "serving", "tools")
# Each package's (or module's) tier, top to bottom as CONTRIBUTING.md draws them: a module may import only from
# its own tier or a lower one. A package's modules share its tier.
TIERS = {
    "app.main": 7,  # Chainlit's callbacks
    "app.__main__": 7,  # `make chat`
    "app.build": 6,  # the app assembled
    "app.presets": 5,  # a feature: its data, its store, its page
    "app.admin": 5,  # the admin page: its routes, its page
    "app.chats": 5,  # the chats page: its routes, its page
    "app.account": 5,  # the account page: API keys and memory, its routes, its page
    "app.api": 5,  # the OpenAI-compatible /v1 routes answered through a personal API key
    "app.web": 4,  # the HTTP guards around Chainlit
    "app.page": 3,  # everything that touches Chainlit
    "app.documents": 2,  # a feature's storage: documents kept, indexed and searched
    "app.history": 2,  # storage
    "app.local_link": 6,  # `make chat`'s key link for the local user, `make link`
    "app.chat": 1,  # the chat core
    "app.identity": 1,  # who a request is: pure decisions
    "app.imports": 1,  # other apps' chat exports read into chats: pure parsing
    "app": 0,  # the package itself (an empty __init__): its modules have tiers of their own
    "app.config": 0,
    "app.errors": 0,
    "app.i18n": 0,
    "app.metrics": 0,
    "app.terms": 0,  # the words of a text for the full-text indexes (documents and messages)
    "app.json_codec": 0,  # JSON per token: orjson, the standard library where orjson refuses
    "app.storable": 0,  # text as both databases keep it (no NUL), for the chat core and the history alike
    "app.listening": 0,  # whether the chat UI's address is free, checked by `make chat` and `make run`
    "serving": 8,  # the server side reads the app's settings only
    "tools": 9,
}
# Where Chainlit may be imported: the callbacks, the page, the presets' page, and the data layer's interface.
CHAINLIT_IMPORTERS = ("app.main", "app.page", "app.presets.panel", "app.history.store", "app.history.rows")
# Folders the layout table names as a whole: Alembic's revisions and entry point.
NAMED_AS_A_FOLDER = ("app/history/migrations/",)
# What the server side and the tools may take from the app: its settings, and whether its address is free
# (`make run` checks it before vLLM loads).
OUTSIDE_THE_APP = {"app.config", "app.listening"}
# Benchmarks of the app's own code, which they import to measure it (beside the alternative, or its SQL plan).
MEASURE_THE_APP = {"tools.bench_retrieval", "tools.bench_search", "tools.explain_search"}


def module_name(path: Path) -> str:
    """The dotted name of a module file under the project root."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every Python module of the project's code, by dotted name."""
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


@functools.cache
def syntax(path: Path) -> ast.Module:
    """A module's syntax tree, parsed with the garbage collector held: Python 3.11.7 fails a parse during which an
    object collected logs a traceback (whose formatting parses too), as an unread failed future does."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text())
    finally:
        if collecting:
            gc.enable()


def holder(module: str) -> str:
    """The longest entry of TIERS that names the module or a package holding it."""
    holders = [name for name in TIERS if module == name or (name != "app" and module.startswith(name + "."))]
    assert holders, f"{module} has no tier in tests/test_layout.py"
    return max(holders, key=len)


def tier(module: str) -> int:
    """The tier of a module: its own entry's, or its package's."""
    return TIERS[holder(module)]


def imports(path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports (a `from package import module` counts as the module)."""
    found: set[str] = set()
    for node in ast.walk(syntax(path)):
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


def test_no_module_imports_from_a_higher_tier():
    upward = [
        f"{module} (tier {tier(module)}) imports {imported} (tier {tier(imported)})"
        for module, imported_modules in graph().items()
        for imported in imported_modules
        if tier(imported) > tier(module)
    ]
    assert upward == []


def chainlit_imports(path: Path) -> list[int]:
    """The lines where a module imports Chainlit, under TYPE_CHECKING too."""
    return [
        node.lineno
        for node in ast.walk(syntax(path))
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "chainlit" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "chainlit")
    ]


def test_the_chat_core_never_imports_chainlit():
    offenders = [
        f"{name}:{lines}"
        for name, path in modules().items()
        if name.startswith("app.chat.") and (lines := chainlit_imports(path))
    ]
    assert offenders == []


def test_chainlit_is_imported_only_where_the_layout_allows():
    allowed = tuple(CHAINLIT_IMPORTERS)
    offenders = [
        name
        for name, path in modules().items()
        if name.startswith("app")
        and chainlit_imports(path)
        and not (name in allowed or name.startswith(tuple(a + "." for a in allowed)))
    ]
    assert offenders == []


def package_graph() -> dict[str, set[str]]:
    """Each package's (or top-level module's) imports of other packages, by their TIERS entry."""
    edges: dict[str, set[str]] = {}
    for module, imported_modules in graph().items():
        edges.setdefault(holder(module), set()).update(
            holder(i) for i in imported_modules if holder(i) != holder(module)
        )
    return edges


def test_the_server_side_and_the_tools_take_only_the_settings_from_the_app():
    taken = {
        f"{module} imports {imported}"
        for module, imported_modules in graph().items()
        if not module.startswith("app") and module not in MEASURE_THE_APP
        for imported in imported_modules
        if imported.startswith("app") and imported not in OUTSIDE_THE_APP
    }
    assert taken == set()


def cycles_in(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import loops in a graph, one per starting point that finds one."""
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

    return [cycle for module in sorted(edges) if module not in state and (cycle := visit(module, []))]


def test_no_import_cycle_between_modules():
    assert cycles_in(graph()) == []


def test_no_import_loop_between_packages():
    assert cycles_in(package_graph()) == []


@pytest.mark.parametrize("module", sorted(modules()))
def test_the_layout_table_names_every_module(module):
    layout = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"`([\w/.]+)`", layout))
    path = modules()[module].relative_to(ROOT).as_posix()
    if path.startswith(NAMED_AS_A_FOLDER):
        assert named & set(NAMED_AS_A_FOLDER)
    elif path.endswith("/__init__.py"):  # a package may be named by its folder
        assert {path, path.removesuffix("__init__.py")} & named, f"{path} is not in the layout table (docs/layout.md)"
    else:
        assert path in named, f"{path} is not in the layout table (docs/layout.md)"
