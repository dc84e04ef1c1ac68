"""YAML text to data in one pass, with the alias budget and the duplicate-key check.

``parse_yaml`` reads libyaml's events once (PyYAML's C parser) and builds the data straight from
them, as PyYAML's safe loader would build it: the same scalars (its own resolver and
constructors), merge keys (``<<``) and shared aliases, without composing a node graph first. A
5 MB agent.yaml parses in under a second instead of eight. On the way it refuses a file whose
aliases (``*name``) are too many or expand to too many nodes (a "billion laughs" file), or refer
to a node that contains them, at the alias that breaks the budget, before anything large is
built.

Whatever the one pass does not build itself goes the general way: PyYAML composes the node
graph and constructs it, the alias budget is checked on the events beforehand and duplicate keys
are found on the graph, each with its line and the line of its first occurrence. That is a
duplicate key (an error: the general way reports every one), explicit tags such as ``!!set``,
complex or aliased keys, undefined aliases, duplicate anchors, more than one document, and
merges other than one mapping into another. Both ways give the same data, the same problems
and the same error messages.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import ScalarNode

from runs.core.agentconfig.limits import MAX_YAML_ALIAS_NODES, MAX_YAML_ALIASES

SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# (path of the mapping, key, line, line of the first occurrence); the path's parts are the keys
# (as text) and list indices from the document's root.
KeyPath = tuple[str | int, ...]
DuplicateKey = tuple[KeyPath, Any, int, int]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_CACHED_TYPES = (str, int, bool, type(None))  # immutable results a plain scalar may share


def parse_yaml(text: str) -> tuple[Any, list[DuplicateKey]]:
    """The document's data and its duplicate keys (by line); ``yaml.YAMLError`` for bad YAML or
    aliases beyond the budget."""
    try:
        return _Builder(text).build(), []
    except _Unusual:
        return _parse_nodes(text)


class _Unusual(Exception):
    """Something the one pass leaves to the general way (a duplicate key among them: the
    general way reports every one with the line of its first occurrence)."""


_MISSING: Any = object()  # no key waiting for its value
_MERGE: Any = object()  # the ``<<`` key waiting for its value


class _Frame:
    """A mapping or sequence being built."""

    __slots__ = ("anchor", "is_map", "key", "merges", "size", "value")

    def __init__(self, is_map: bool, anchor: str | None) -> None:
        self.is_map = is_map
        self.anchor = anchor
        self.size = 1  # nodes below it, aliases expanded (the alias budget)
        self.value: Any = {} if is_map else []  # a mapping's own keys (not merged ones)
        self.key: Any = _MISSING  # a mapping's key waiting for its value
        self.merges: dict[Any, Any] | None = None  # the mapping merged into it


class _Builder:
    def __init__(self, text: str) -> None:
        self.loader = SAFE_LOADER(text)
        self.plain: dict[str, Any] = {}  # plain scalar text -> its value (immutable ones)
        self.anchored: dict[str, Any] = {}  # anchor -> its value
        self.sizes: dict[str, int] = {}  # anchor -> its node count, aliases expanded
        self.stack: list[_Frame] = []
        self.merged: set[int] = set()  # ids of the dicts that merged a mapping
        self.aliases = 0
        self.expanded = 0
        self.documents = 0

    def build(self) -> Any:
        try:
            return self._events()
        finally:
            self.loader.dispose()

    def _events(self) -> Any:
        """The document's data. The common events (plain and quoted scalars, collections) are
        handled inline: a 5 MB file has 700,000 of them."""
        get_event = self.loader.get_event
        plain = self.plain
        stack = self.stack
        top: _Frame | None = None  # stack[-1]
        data: Any = None
        while True:
            event = get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if event.tag is not None and event.tag != "!":
                    raise _Unusual
                value = event.value
                if event.implicit[0]:  # plain: resolved (``3`` is an int, ``~`` None)
                    value = plain.get(value, _MISSING)
                    if value is _MISSING:
                        value = self._scalar(event)
                if event.anchor is not None:
                    self._anchor(event.anchor, value, 1)
                if top is None:
                    data = value
                    continue
                top.size += 1
                if not top.is_map:
                    top.value.append(value)
                elif top.key is _MISSING:  # a key
                    if value is not _MERGE and value in top.value:
                        raise _Unusual  # a duplicate key
                    top.key = value
                elif top.key is _MERGE:
                    self._merge(top, value)
                else:
                    top.value[top.key] = value
                    top.key = _MISSING
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                top = self._open(event, kind is MappingStartEvent, top)
            elif kind is MappingEndEvent or kind is SequenceEndEvent or kind is AliasEvent:
                if kind is AliasEvent:  # a collection or a value again, by its anchor
                    value, size = self._alias(event)
                    if top is not None and top.is_map and top.key is _MISSING:
                        raise _Unusual  # an aliased key
                else:
                    value, size = self._close()
                    top = stack[-1] if stack else None
                if top is None:
                    data = value
                    continue
                top.size += size
                self._add(top, value)
            elif kind is DocumentStartEvent:
                self._start_document()
            elif kind is StreamEndEvent:
                return data
            elif kind is not StreamStartEvent and kind is not DocumentEndEvent:
                raise _Unusual

    def _open(self, event: Any, is_map: bool, top: _Frame | None) -> _Frame:
        """A mapping or sequence that starts (``event``): its frame, on the stack."""
        if event.tag is not None and event.tag != "!":
            raise _Unusual
        if top is not None and top.is_map and top.key is _MISSING:
            raise _Unusual  # a complex key
        frame = _Frame(is_map, event.anchor)
        self.stack.append(frame)
        return frame

    def _close(self) -> tuple[Any, int]:
        """The collection that ends: its value (merged, anchored) and its node count."""
        frame = self.stack.pop()
        value = frame.value if frame.merges is None else self._with_merge(frame)
        if frame.anchor is not None:
            self._anchor(frame.anchor, value, frame.size)
        return value, frame.size

    def _start_document(self) -> None:
        self.documents += 1
        if self.documents > 1:
            raise _Unusual  # the general way says "expected a single document"
        self.sizes.clear()

    def _add(self, frame: _Frame, value: Any) -> None:
        """A collection or an aliased value into its parent."""
        if not frame.is_map:
            frame.value.append(value)
        elif frame.key is _MERGE:
            self._merge(frame, value)
        else:
            frame.value[frame.key] = value
            frame.key = _MISSING

    def _merge(self, frame: _Frame, value: Any) -> None:
        """``<<: mapping``: the mapping's own keys win over the merged ones. One merge of a
        mapping that merged nothing itself; PyYAML 6.0.4 keeps the first of equal merged keys
        only when they are the same string object (a one-letter key, say), which only the
        general way can tell, so a list of mappings, two merges or a merge of a merge go
        there."""
        if frame.merges is not None or not isinstance(value, dict) or id(value) in self.merged:
            raise _Unusual
        frame.merges = value
        frame.key = _MISSING

    def _with_merge(self, frame: _Frame) -> dict[Any, Any]:
        """A mapping's dict with the mapping merged into it."""
        merged = {**(frame.merges or {}), **frame.value}
        self.merged.add(id(merged))
        return merged

    def _scalar(self, event: ScalarEvent) -> Any:
        """A plain scalar's value (``3`` is an int, ``yes`` a bool, ``~`` None), as resolved and
        constructed by the safe loader."""
        text = event.value
        loader = self.loader
        tag = loader.resolve(ScalarNode, text, (True, False))
        if tag == _STR_TAG:
            value = text
        elif tag == _MERGE_TAG:
            top = self.stack[-1] if self.stack else None
            if top is None or not top.is_map or top.key is not _MISSING:
                raise _Unusual  # ``<<`` as a value: the general way refuses it
            return _MERGE
        elif tag == _VALUE_TAG:
            raise _Unusual  # ``=``: the general way refuses it (a key's duplicate check fails)
        else:
            start: Any = event.start_mark  # libyaml's Mark, which ScalarNode's stub does not name
            node = ScalarNode(tag, text, start, start, event.style)
            try:
                value = loader.yaml_constructors[tag](loader, node)
            except Exception:  # the general way raises what the constructor raises
                raise _Unusual from None
        if type(value) in _CACHED_TYPES:
            self.plain[text] = value
        return value

    def _alias(self, event: AliasEvent) -> tuple[Any, int]:
        """The aliased value and its node count, within the budget."""
        self.aliases += 1
        if self.aliases > MAX_YAML_ALIASES:
            raise _marked(event, f"too many aliases (more than {MAX_YAML_ALIASES})")
        if any(frame.anchor == event.anchor for frame in self.stack):
            raise _marked(event, f"alias *{event.anchor} refers to a node that contains it")
        size = self.sizes.get(str(event.anchor), 1)
        self.expanded += size
        if self.expanded > MAX_YAML_ALIAS_NODES:
            raise _marked(
                event, f"aliases expand to too many nodes (more than {MAX_YAML_ALIAS_NODES})"
            )
        value = self.anchored.get(str(event.anchor), _MISSING)
        if value is _MISSING:
            raise _Unusual  # an undefined alias
        return value, size

    def _anchor(self, anchor: str, value: Any, size: int) -> None:
        if anchor in self.anchored or value is _MERGE:
            raise _Unusual  # a duplicate anchor, or an anchored ``<<``
        self.anchored[anchor] = value
        self.sizes[anchor] = size


def _marked(event: yaml.Event, problem: str) -> yaml.MarkedYAMLError:
    mark: Any = event.start_mark  # libyaml's Mark has the same line and column
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


# --- the general way: PyYAML's node graph -----------------------------------------------------


def _parse_nodes(text: str) -> tuple[Any, list[DuplicateKey]]:
    _check_aliases(text)
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        duplicates = _duplicate_keys(node, loader) if node is not None else []
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return data, duplicates


def _check_aliases(text: str) -> None:
    """Refuse a file whose aliases are too many or expand to too many nodes, or refer to a node
    that contains them, before anything is built: one pass over the parser's events, which never
    expand an alias (skipped when the text has no ``*``)."""
    if "*" not in text:
        return
    sizes: dict[str, int] = {}  # anchor -> its node count with aliases expanded
    open_nodes: list[tuple[str | None, list[int]]] = []  # (anchor, [node count]) per collection
    aliases = expanded = 0
    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if isinstance(event, yaml.DocumentStartEvent):
            sizes.clear()
            continue
        if isinstance(event, yaml.CollectionStartEvent):
            open_nodes.append((event.anchor, [1]))
            continue
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise _marked(event, f"too many aliases (more than {MAX_YAML_ALIASES})")
            if any(anchor == event.anchor for anchor, _ in open_nodes):
                raise _marked(event, f"alias *{event.anchor} refers to a node that contains it")
            size = sizes.get(str(event.anchor), 1)  # an undefined alias: the composer says so
            expanded += size
            if expanded > MAX_YAML_ALIAS_NODES:
                raise _marked(
                    event, f"aliases expand to too many nodes (more than {MAX_YAML_ALIAS_NODES})"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, (size,) = open_nodes.pop()
            if anchor:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor:
                sizes[event.anchor] = size
        else:
            continue
        if open_nodes:
            open_nodes[-1][1][0] += size


def _duplicate_keys(root: yaml.Node, loader: Any) -> list[DuplicateKey]:
    """Keys given twice in one mapping, by line."""
    found: list[DuplicateKey] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, KeyPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue  # an alias of a node already checked
        seen.add(id(node))
        children: list[tuple[yaml.Node, KeyPath]] = []
        if isinstance(node, yaml.SequenceNode):
            children = [(child, (*path, index)) for index, child in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a complex key: nothing in agent.yaml has one
                if key_node.tag == _MERGE_TAG:  # ``<<: *base``: its keys may be overridden
                    children.append((value_node, path))
                    continue
                key = loader.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first:
                    found.append((path, key, line, first[key]))
                else:
                    first[key] = line
                children.append((value_node, (*path, str(key))))
        stack.extend(reversed(children))  # document order, so an alias's path is its first
    return sorted(found, key=lambda item: item[2])
