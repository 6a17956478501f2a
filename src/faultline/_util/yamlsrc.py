"""YAML with line numbers, so every error can name the line of the bad field.

:func:`load_yaml` returns plain Python values, except that mappings are :class:`LineDict`
(a ``dict`` that remembers the line of itself and of each key) and sequences are
:class:`LineList` (a ``list`` that remembers the line of each item). A key that appears twice
in one mapping is an error instead of PyYAML's silent "last one wins".
"""

from __future__ import annotations

from typing import Any

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


class _LineLoader(_BaseLoader):  # type: ignore[valid-type, misc]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> LineDict:  # noqa: ARG002
        result = LineDict()
        result.line = node.start_mark.line + 1
        result.key_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key)
            if key in result:
                raise _DuplicateKeyError(key, key_node.start_mark.line + 1)
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> LineList:  # noqa: ARG002
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.item_lines = [child.start_mark.line + 1 for child in node.value]
        return result


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
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
            f"key '{exc.key}' appears twice in one mapping; keep one", path=path, line=exc.line
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        what = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise error(f"not valid YAML: {what}", path=path, line=line) from None
    except yaml.YAMLError as exc:
        raise error(f"not valid YAML: {' '.join(str(exc).split())}", path=path) from None
    except RecursionError:
        raise error("not valid YAML: nested too deeply", path=path) from None
