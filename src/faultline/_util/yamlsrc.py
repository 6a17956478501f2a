"""YAML with line numbers, so every error can name the line of the bad field.

:func:`load_yaml` returns plain Python values, except that mappings are :class:`LineDict`
(a ``dict`` that remembers the line of itself and of each key, and how each number among its
values was written) and sequences are :class:`LineList` (a ``list`` that remembers the line of
each item). A key that appears twice in one mapping is an error instead of PyYAML's silent
"last one wins". Aliases (``*name``) may repeat an anchored value, but a document whose aliases
expand it by more than :data:`ALIAS_EXPANSION_LIMIT` values (a "billion laughs") is an error,
found before anything is built.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import yaml

from faultline.errors import InputError

__all__ = ["ALIAS_EXPANSION_LIMIT", "LineDict", "LineList", "line_of", "load_yaml", "text_of"]

ALIAS_EXPANSION_LIMIT = 1_000_000
"""The most values aliases may add to a document, counting each alias as a copy of its value."""

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineDict(dict[str, Any]):
    """A mapping read from YAML, with ``line`` (its own) and ``key_lines`` (each key's).

    ``number_texts`` holds, for each value YAML read as a number, the number as written:
    ``010`` (which YAML 1.1 reads as 8), ``0x1F``, ``1.10``, ``1_000``.
    """

    line: int = 0
    key_lines: dict[str, int]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.key_lines = {}
        self.number_texts: dict[str, str] = {}

    def line_of(self, key: str) -> int:
        """The 1-based line of ``key``, or of the mapping when the key is absent."""
        return self.key_lines.get(key, self.line)


class LineList(list[Any]):
    """A sequence read from YAML, with ``line`` (its own) and ``item_lines`` (each item's)."""

    line: int = 0
    item_lines: list[int]


def line_of(value: object, default: int | None = None) -> int | None:
    """The line a value read by :func:`load_yaml` started on, if it is a mapping or sequence."""
    if isinstance(value, LineDict | LineList):
        return value.line
    return default


class _DuplicateKeyError(Exception):
    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line


class _ConstructError(Exception):
    def __init__(self, reason: str, line: int) -> None:
        self.reason, self.line = reason, line


_MERGE_TAG = "tag:yaml.org,2002:merge"
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


_YAML_ONLY_BREAKS = re.compile("[\x85\u2028\u2029]")
_BREAK = re.compile(r"\r\n|\r|\n")

Lines = Callable[[Any], int]
"""The 1-based line of a PyYAML mark, as an editor shows it."""


def _editor_lines(text: str) -> Lines:
    r"""The line of a mark counting only ``\n``, ``\r\n`` and ``\r`` as line breaks.

    YAML also breaks lines at NEL (U+0085), U+2028 and U+2029, which editors, ``grep -n`` and
    the JSONL readers do not: each one in a string would move every later line by one.
    """
    if not _YAML_ONLY_BREAKS.search(text):
        return lambda mark: int(mark.line) + 1
    starts = [0, *(m.end() for m in _BREAK.finditer(text))]
    return lambda mark: bisect_right(starts, mark.index)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_expansion(root: yaml.Node, line: Lines) -> bool:
    """Refuse a document whose aliases expand it by more than :data:`ALIAS_EXPANSION_LIMIT`.

    Each node's size counts an alias as a copy of its anchored value; the sizes are found
    once per node, so the check is linear in the document, not in its expansion.

    Returns:
        Whether the document uses an alias at all.
    """
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if finished:
            sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in _children(node))
        elif id(node) not in entered:  # a node met again while open is a cycle: counted once
            entered.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if id(c) not in entered)
    expansion = sizes[id(root)] - len(sizes)
    if expansion <= ALIAS_EXPANSION_LIMIT:
        return expansion > 0
    node = root  # follow the largest expansion down, to the smallest node that is too big
    while (heavy := max(_children(node), key=lambda c: sizes.get(id(c), 1), default=None)) and (
        sizes.get(id(heavy), 1) > ALIAS_EXPANSION_LIMIT
    ):
        node = heavy
    raise _ConstructError(
        f"its aliases expand it to more than {ALIAS_EXPANSION_LIMIT:,} values; "
        "write the repeated values out, or nest fewer aliases",
        line(node.start_mark),
    )


class _LineLoader(_BaseLoader):  # type: ignore[valid-type, misc]
    # Dates stay text: an id like 2024-13-45 is a string, not an impossible date.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, Any]]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }

    source = ""
    """The YAML text, set by :func:`load_yaml`: read again for the lines of aliases."""
    item_lines: dict[tuple[int, int], list[int]]
    """Where each item of each sequence is written, when the document uses aliases."""
    line: Lines = staticmethod(lambda mark: int(mark.line) + 1)
    """The line of a mark, as an editor shows it: set by :func:`load_yaml`."""

    def construct_document(self, node: yaml.Node) -> Any:
        # An alias is the node it names, whose marks are the anchor's: the lines where each
        # sequence item is written (an alias's own line) come from the events.
        aliased = _check_expansion(node, self.line)
        self.item_lines = _item_lines(self.source, self.line) if aliased else {}
        return super().construct_document(node)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (_DuplicateKeyError, _ConstructError, yaml.YAMLError, RecursionError):
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            tag = node.tag.rsplit(":", 1)[-1]
            shown = repr(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            reason = f"cannot read {shown} as {tag} ({exc})"
            raise _ConstructError(reason, self.line(node.start_mark)) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineDict:  # noqa: ARG002
        pairs = getattr(node, "own_pairs", None)
        own = {id(k) for k, _ in (node.value if pairs is None else pairs)}
        result = LineDict()
        result.line = self.line(node.start_mark)
        set_by_own: set[str] = set()
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key)
            mine = id(key_node) in own
            if mine and key in set_by_own:
                raise _DuplicateKeyError(key, self.line(key_node.start_mark))
            if mine:
                set_by_own.add(key)
            # Keys merged in with << come first; the mapping's own keys override them.
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = self.line(key_node.start_mark)
            if isinstance(value_node, yaml.ScalarNode) and value_node.tag in _NUMBER_TAGS:
                result.number_texts[key] = value_node.value
            else:
                result.number_texts.pop(key, None)  # an own key overrode a merged number
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LineList:  # noqa: ARG002
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = self.line(node.start_mark)
        written = self.item_lines.get((node.start_mark.line, node.start_mark.column))
        result.item_lines = written or [self.line(child.start_mark) for child in node.value]
        return result


_ITEM_STARTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


def _item_lines(text: str, line: Lines) -> dict[tuple[int, int], list[int]]:
    """For each sequence, by the (line, column) where it starts: the line of each item.

    An item that is an alias (``- *a``) is on the alias's line, not its anchor's.
    """
    out: dict[tuple[int, int], list[int]] = {}
    open_items: list[list[int] | None] = []  # per open collection: a sequence's item lines
    for event in yaml.parse(text, Loader=_BaseLoader):
        mark = event.start_mark  # the parser marks every event
        at = (-1, -1) if mark is None else (mark.line, mark.column)
        if isinstance(event, _ITEM_STARTS) and open_items and open_items[-1] is not None:
            open_items[-1].append(0 if mark is None else line(mark))
        if isinstance(event, yaml.SequenceStartEvent):
            lines: list[int] = []
            out[at] = lines
            open_items.append(lines)
        elif isinstance(event, yaml.MappingStartEvent):
            open_items.append(None)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            open_items.pop()
    return out


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    own = [(k, v) for k, v in node.value if k.tag != _MERGE_TAG]
    loader.flatten_mapping(node)
    node.own_pairs = own  # type: ignore[attr-defined]
    return loader.construct_mapping(node)


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    return loader.construct_sequence(node)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def text_of(obj: Mapping[str, Any], key: str) -> str | None:
    """``obj[key]`` as text: a string, or a number as written; ``None`` for anything else.

    A YAML number keeps the digits in the file (``010``, ``0x1F``, ``1.10``), not the value
    YAML reads (8, 31, 1.1). A JSON whole number is written one way only; a JSON fraction is
    not text (``1.10`` reads as 1.1), so it is ``None``: the message asks for a string.
    """
    value = obj[key]
    if isinstance(value, str):
        return value
    if isinstance(obj, LineDict) and key in obj.number_texts:
        return obj.number_texts[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


_TOO_DEEP = "nested too deeply"


def load_yaml(text: str, *, path: str, error: type[InputError]) -> Any:
    """Parse one YAML document, keeping line numbers.

    Args:
        text: The YAML source.
        path: The file name, for messages.
        error: The :class:`InputError` subclass to raise.

    Raises:
        InputError: The text is not valid YAML, holds several documents, repeats a key,
            nests too deeply, or its aliases expand it by more than
            :data:`ALIAS_EXPANSION_LIMIT` values.
    """
    loader = _LineLoader(text)
    loader.source = text
    loader.line = _editor_lines(text)
    try:
        return loader.get_single_data()
    except _DuplicateKeyError as exc:
        raise error(
            f"key '{exc.key}' appears twice in one mapping; keep one",
            path=path,
            line=exc.line,
            field=exc.key,
        ) from None
    except _ConstructError as exc:
        raise error(f"not valid YAML: {exc.reason}", path=path, line=exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else loader.line(mark)
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        if what == "exceeded maximum nesting depth":  # libyaml's limit (PyYAML 6.0.4 and later)
            what = _TOO_DEEP
        raise error(f"not valid YAML: {what}", path=path, line=line) from None
    except yaml.YAMLError as exc:
        raise error(f"not valid YAML: {' '.join(str(exc).split())}", path=path) from None
    except RecursionError:  # the pure-Python parser, or libyaml before its own limit
        raise error(f"not valid YAML: {_TOO_DEEP}", path=path) from None
    finally:
        loader.dispose()
