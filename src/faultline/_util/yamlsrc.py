"""YAML with line numbers, so every error can name the line of the bad field.

:func:`load_yaml` returns plain Python values, except that mappings are :class:`LineDict`
(a ``dict`` that remembers the line of itself and of each key) and sequences are
:class:`LineList` (a ``list`` that remembers the line of each item). A key that appears twice
in one mapping is an error instead of PyYAML's silent "last one wins".
"""

from __future__ import annotations

from typing import Any, ClassVar

import yaml

from faultline.errors import InputError

__all__ = ["LineDict", "LineList", "line_of", "load_yaml"]

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineDict(dict[str, Any]):
    """A mapping read from YAML, with ``line`` (its own) and ``key_lines`` (each key's)."""

    line: int = 0
    key_lines: dict[str, int]

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


class _LineLoader(_BaseLoader):  # type: ignore[valid-type, misc]
    # Dates stay text: an id like 2024-13-45 is a string, not an impossible date.
    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, Any]]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (_DuplicateKeyError, _ConstructError, yaml.YAMLError, RecursionError):
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            tag = node.tag.rsplit(":", 1)[-1]
            shown = repr(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            reason = f"cannot read {shown} as {tag} ({exc})"
            raise _ConstructError(reason, node.start_mark.line + 1) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineDict:  # noqa: ARG002
        pairs = getattr(node, "own_pairs", None)
        own = {id(k) for k, _ in (node.value if pairs is None else pairs)}
        result = LineDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        set_by_own: set[str] = set()
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key)
            mine = id(key_node) in own
            if mine and key in set_by_own:
                raise _DuplicateKeyError(key, key_node.start_mark.line + 1)
            if mine:
                set_by_own.add(key)
            # Keys merged in with << come first; the mapping's own keys override them.
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LineList:  # noqa: ARG002
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    own = [(k, v) for k, v in node.value if k.tag != _MERGE_TAG]
    loader.flatten_mapping(node)
    node.own_pairs = own  # type: ignore[attr-defined]
    return loader.construct_mapping(node)


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    return loader.construct_sequence(node)


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def load_yaml(text: str, *, path: str, error: type[InputError]) -> Any:
    """Parse one YAML document, keeping line numbers.

    Args:
        text: The YAML source.
        path: The file name, for messages.
        error: The :class:`InputError` subclass to raise.

    Raises:
        InputError: The text is not valid YAML, holds several documents, repeats a key, or
            nests too deeply.
    """
    try:
        return yaml.load(text, Loader=_LineLoader)
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
        line = None if mark is None else mark.line + 1
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise error(f"not valid YAML: {what}", path=path, line=line) from None
    except yaml.YAMLError as exc:
        raise error(f"not valid YAML: {' '.join(str(exc).split())}", path=path) from None
    except RecursionError:
        raise error("not valid YAML: nested too deeply", path=path) from None
