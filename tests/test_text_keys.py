"""Every text the app asks for exists in English and Chinese, with the same placeholders, filled where it is asked.

The app's source is read with `ast`: each `text(lang, key, ...)` call, each `TEXT[lang][key]` lookup and each
`ChatError(problem, ...)` (shown by `error_text`) is a place that asks for a text. A key spelled out in the source
(a literal, `Problem.X`, a name bound to literals, a value of a dict of literals, `label_key("x")`) is read from it;
a key built at run time (`preset.label_key`, `error.problem` ...) is listed in BUILT with every key it can be,
enumerated from the app's own tables, so a new kind of built key fails here until it is listed.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.chat.preferences import Preferences
from app.errors import Problem
from app.history.writes import Saving
from app.i18n import ERROR_BLANKS, TEXT
from app.page.library_page import LABELS
from app.page.settings_panel import label_key, tip_key
from app.presets.builtin import BUILT_IN, summary
from app.presets.panel import DONE, FAILURES
from app.presets.store import Outcome

APP = Path(__file__).resolve().parent.parent / "app"
I18N = "app/i18n.py"
# Functions of one setting that give a key: a call with a literal argument is read like a literal.
KEY_FUNCTIONS: dict[str, Callable[[str], str]] = {"label_key": label_key, "tip_key": tip_key}
# Keys built at run time, by (module, the key's expression there): every key each can be.
BUILT: dict[tuple[str, str], set[str]] = {
    (I18N, "error.problem"): {str(problem) for problem in Problem},  # error_text, for any ChatError
    ("app/page/settings_panel.py", "label_key(key)"): {label_key(setting) for setting in Preferences.model_fields},
    ("app/page/settings_panel.py", "tip_key(key)"): {tip_key(setting) for setting in Preferences.model_fields},
    ("app/presets/builtin.py", "self.prompt_key"): {preset.prompt_key for preset in BUILT_IN if preset.own_prompt},
    ("app/presets/builtin.py", "preset.label_key"): {preset.label_key for preset in BUILT_IN},
    ("app/presets/panel.py", "preset.label_key"): {preset.label_key for preset in BUILT_IN},
    ("app/presets/panel.py", "preset.about_key"): {preset.about_key for preset in BUILT_IN},
    ("app/page/library_page.py", "label"): set(LABELS.values()),
    ("app/page/answer_controls.py", "f'unsaved_{unsaved}'"): {f"unsaved_{saving}" for saving in Saving},
}


@dataclass(frozen=True)
class Site:
    """A place in the app's source that asks for a text."""

    where: str  # path:line
    module: str
    key: ast.expr
    given: frozenset[str] | None  # the keyword arguments filling the text; None when passed as **values
    blanks: frozenset[str] = frozenset()  # placeholders filled anyway (error_text's, for a ChatError)

    @property
    def built(self) -> tuple[str, str]:
        return self.module, ast.unparse(self.key)


def placeholders(template: str) -> set[str]:
    """The names a template's {placeholders} take ({temperature:g} is temperature)."""
    fields = (field for _, field, _, _ in string.Formatter().parse(template) if field is not None)
    return {re.split(r"[.\[]", field)[0] for field in fields}


def argument(call: ast.Call, index: int, name: str) -> ast.expr:
    """A call's argument, by position or keyword."""
    if len(call.args) > index:
        return call.args[index]
    return next(keyword.value for keyword in call.keywords if keyword.arg == name)


def sites() -> Iterator[tuple[Site, ast.Module]]:
    """Every place in the app that asks for a text, with its module's tree."""
    for path in sorted(APP.rglob("*.py")):
        module = path.relative_to(APP.parent).as_posix()
        tree = ast.parse(path.read_text(), module)
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in {"app.i18n", "app.errors"}
            for alias in node.names
        } | ({"text", "TEXT"} if module == I18N else set())
        for node in ast.walk(tree):
            where = f"{module}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
                given = (
                    None if any(k.arg is None for k in node.keywords) else frozenset(str(k.arg) for k in node.keywords)
                )
                if node.func.id == "text":
                    yield Site(where, module, argument(node, 1, "key"), given), tree
                elif node.func.id == "ChatError":
                    yield Site(where, module, argument(node, 0, "problem"), given, frozenset(ERROR_BLANKS)), tree
            elif (  # TEXT[lang][key], but the lookup in text() itself
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "TEXT"
                and "TEXT" in imported
                and module != I18N
            ):
                yield Site(where, module, node.slice, None), tree


def bindings(name: str, tree: ast.Module) -> list[ast.expr]:
    """What a name is bound to anywhere in a module (for a loop's variable: what it loops over)."""
    bound: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            bound.append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            bound += [node.value] if node.value else []
        elif isinstance(node, (ast.comprehension, ast.For)) and isinstance(node.target, ast.Name):
            bound += [node.iter] if node.target.id == name else []
    return bound


def spelled_out(node: ast.expr, tree: ast.Module) -> set[str] | None:
    """The keys an expression can be when its module spells them out; None when it does not."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Problem":
        return {str(Problem[node.attr])}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KEY_FUNCTIONS:
        arguments = spelled_out(node.args[0], tree) if len(node.args) == 1 else None
        return None if arguments is None else {KEY_FUNCTIONS[node.func.id](a) for a in arguments}
    if isinstance(node, ast.IfExp):
        parts = [node.body, node.orelse]
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        parts = list(node.elts)
    elif isinstance(node, ast.Name):
        parts = bindings(node.id, tree)
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):  # a value of a dict of literals
        tables = bindings(node.value.id, tree)
        if not all(isinstance(table, ast.Dict) for table in tables):
            return None
        parts = [value for table in tables if isinstance(table, ast.Dict) for value in table.values]
    else:
        return None
    keys: set[str] = set()
    for part in parts:
        more = spelled_out(part, tree)
        if more is None:
            return None
        keys |= more
    return keys if parts else None


def asked() -> list[tuple[Site, set[str] | None]]:
    """Every site with the keys it can ask for (None: built at run time and not listed in BUILT)."""
    return [(site, spelled_out(site.key, tree) or BUILT.get(site.built)) for site, tree in sites()]


def test_a_text_has_the_same_placeholders_in_both_languages():
    assert set(TEXT["en"]) == set(TEXT["zh"])
    differ = [
        f"{key}: {sorted(placeholders(TEXT['en'][key]))} in English, {sorted(placeholders(TEXT['zh'][key]))} in Chinese"
        for key in TEXT["en"]
        if placeholders(TEXT["en"][key]) != placeholders(TEXT["zh"][key])
    ]
    assert differ == []
    # text() fills in keyword arguments only: a {} or {0} would fail
    positional = [
        (lang, key) for lang in TEXT for key, t in TEXT[lang].items() if not all(map(str.isidentifier, placeholders(t)))
    ]
    assert positional == []


def test_no_text_is_written_twice():
    """A key written twice keeps its last text silently (a string key equal to a Problem's value too)."""
    tree = ast.parse((APP.parent / I18N).read_text())
    table = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "TEXT"
    )
    assert isinstance(table, ast.Dict)
    for lang, texts in zip(table.keys, table.values, strict=True):
        assert isinstance(lang, ast.Constant) and isinstance(lang.value, str) and isinstance(texts, ast.Dict)
        assert len(texts.keys) == len(TEXT[lang.value]), lang.value


def test_every_key_built_at_run_time_is_listed():
    unlisted = [f"{site.where}: {ast.unparse(site.key)}" for site, keys in asked() if keys is None]
    assert unlisted == [], "list each in BUILT with the keys it can be"
    stale = set(BUILT) - {site.built for site, _ in sites()}
    assert stale == set()


def test_every_text_the_app_asks_for_exists_in_both_languages():
    missing = [
        f"{site.where}: {key} in {lang}"
        for site, keys in asked()
        for key in sorted(keys or ())
        for lang in TEXT
        if key not in TEXT[lang]
    ]
    assert missing == []


def test_the_values_given_fill_every_placeholder():
    unfilled = [
        f"{site.where}: {key} in {lang} needs {sorted(needed)}"
        for site, keys in asked()
        if site.given is not None
        for key in sorted(keys or ())
        for lang in TEXT
        if key in TEXT[lang] and (needed := placeholders(TEXT[lang][key]) - site.given - site.blanks)
    ]
    assert unfilled == []


def test_the_preset_summary_is_filled_in_both_languages():
    """summary() passes the preferences as **values, which the test above cannot read."""
    preferences = Preferences(temperature=0.7, top_p=0.9, max_tokens=512, repetition_penalty=1.1, system_prompt="")
    for lang in TEXT:
        assert "512" in summary(lang, preferences)


def test_every_outcome_of_a_change_to_a_preset_is_said():
    assert set(DONE) | set(FAILURES) == set(Outcome) and not set(DONE) & set(FAILURES)


def test_every_text_is_asked_for():
    every = {key for _, keys in asked() for key in keys or ()}
    assert set(TEXT["en"]) - every == set()
