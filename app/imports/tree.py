"""An export's message tree made into this app's: hidden nodes passed over, an answer given in several nodes (a tool
call, then its result) joined into one, each message later than the one it follows, the versions shown kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.imports.model import ASSISTANT, USER, ImportedMessage, after, moment

# The parent of a chat's first messages, in ImportedChat.shown as in this app's trees.
ROOT = ""


@dataclass(frozen=True)
class Node:
    """A node of an export's tree: its key, its parent's, its children's in their order; its message, if it has one
    this app shows (None: a root, a system prompt, a hidden or a tool's node)."""

    key: str
    parent: str | None
    children: Sequence[str] = ()
    message: ImportedMessage | None = None


@dataclass
class Tree:
    """The messages this app keeps, each after the one it follows, and the versions shown."""

    messages: list[ImportedMessage] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)
    # Answers that follow no question (a greeting, a chat begun by the assistant): this app has no place for them.
    left_out: int = 0


def in_order(nodes: Mapping[str, Node]) -> list[Node]:
    """Every node reachable from a root, parents first, children in the order the export gives (loops broken)."""
    children: dict[str | None, list[str]] = {}
    for node in nodes.values():
        listed = [child for child in node.children if child in nodes and nodes[child].parent == node.key]
        children.setdefault(node.key, []).extend(dict.fromkeys(listed))
    for node in nodes.values():
        parent = node.parent if node.parent in nodes else None
        siblings = children.setdefault(parent, [])
        if node.key not in siblings:
            siblings.append(node.key)
    ordered: list[Node] = []
    seen: set[str] = set()
    stack = list(reversed(children.get(None, [])))
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        ordered.append(nodes[key])
        stack.extend(reversed(children.get(key, [])))
    return ordered


def build(nodes: Mapping[str, Node], current: str | None, start: str) -> Tree:
    """The app's tree of an export's nodes; `current` is the node shown last, `start` the chat's creation time."""
    ordered = in_order(nodes)
    kept_parent: dict[str, str | None] = {}  # each node's nearest ancestor with a message
    for node in ordered:
        parent = node.parent if node.parent in nodes else None  # parents come first
        kept_parent[node.key] = kept_parent[parent] if parent is not None and nodes[parent].message is None else parent
    kept_children: dict[str, list[str]] = {}
    for node in ordered:
        if node.message is not None and (parent := kept_parent[node.key]) is not None:
            kept_children.setdefault(parent, []).append(node.key)
    tree = Tree()
    question: dict[str, str] = {}  # an answer node's question
    said: dict[str, ImportedMessage] = {}  # an answer node's message so far: its chain's texts joined, the model named
    emitted: set[str] = set()  # the nodes that are a message of the tree (a chain's middle node is none)
    for node in ordered:
        message, parent = node.message, kept_parent[node.key]
        if message is None:
            continue
        above = nodes[parent].message if parent is not None else None
        if message.role == USER:
            follows = parent if parent in emitted else None
            tree.messages.append(dataclasses.replace(message, parent=follows))
            emitted.add(node.key)
            continue
        if above is None or parent is None:
            tree.left_out += 1
            continue
        if above.role == ASSISTANT:
            if parent not in question:
                tree.left_out += 1
                continue
            question[node.key] = question[parent]
            text = "\n\n".join(part for part in (said[parent].content, message.content) if part)
            said[node.key] = dataclasses.replace(message, content=text, model=message.model or said[parent].model)
        else:
            question[node.key], said[node.key] = parent, message
        below = [nodes[child].message for child in kept_children.get(node.key, [])]
        if not below or any(child is not None and child.role == USER for child in below):
            answer = dataclasses.replace(said[node.key], parent=question[node.key])
            tree.messages.append(answer)
            emitted.add(node.key)
    tree.messages = timed(tree.messages, start)
    tree.shown = shown_along(tree.messages, shown_end(nodes, kept_children, emitted, current))
    return tree


def timed(messages: list[ImportedMessage], start: str) -> list[ImportedMessage]:
    """The messages oldest first, each later than the one it follows and than the one before it (no two at once)."""
    times: dict[str, str] = {}
    for message in messages:  # parents first
        time = message.created_at or (times[message.parent] if message.parent is not None else start)
        if message.parent is not None and moment(time) <= moment(times[message.parent]):
            time = after(times[message.parent])
        times[message.key] = time
    position = {message.key: index for index, message in enumerate(messages)}
    ordered = sorted(messages, key=lambda message: (moment(times[message.key]), position[message.key]))
    result: list[ImportedMessage] = []
    for message in ordered:
        time = times[message.key]
        if result and moment(time) <= moment(result[-1].created_at):
            time = after(result[-1].created_at)
        result.append(dataclasses.replace(message, created_at=time))
    return result


def shown_end(
    nodes: Mapping[str, Node], kept_children: Mapping[str, list[str]], emitted: set[str], current: str | None
) -> str | None:
    """The message in the tree that the export showed last: the current node's, or the nearest one kept."""
    key = current if current in nodes else None
    while key is not None and key not in emitted and kept_children.get(key):
        key = kept_children[key][-1]  # a chain's middle node: its answer ends further down
    while key is not None and key not in emitted:
        key = nodes[key].parent if nodes[key].parent in nodes else None
    return key


def shown_along(messages: Sequence[ImportedMessage], end: str | None) -> dict[str, str]:
    """Which version each parent shows on the way to `end`, where it is not the newest (as this app keeps it)."""
    if end is None:
        return {}
    by_key = {message.key: message for message in messages}
    newest: dict[str, str] = {}
    for message in messages:  # oldest first: the last one written wins
        newest[message.parent or ROOT] = message.key
    shown: dict[str, str] = {}
    key: str | None = end
    while key is not None:
        parent = by_key[key].parent or ROOT
        if newest[parent] != key:
            shown[parent] = key
        key = by_key[key].parent
    return shown
