"""Load probe sets from YAML, JSONL, a directory of them, or a built-in set by name.

A YAML probe set is a list of probes, or a mapping with ``probes`` (that list) and optional
``name``, ``version`` and ``description``. A JSONL probe set has one probe object per line.
Every problem is an :class:`~faultline.errors.ProbeError` naming the file, the line and the
field, what was found and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from faultline._util.files import jsonl_objects, read_text_file
from faultline._util.text import (
    describe_value,
    did_you_mean,
    one_of,
    shown_value,
    well_formed,
)
from faultline._util.yamlsrc import LineDict, LineList, load_yaml, text_of
from faultline.errors import ProbeError, UsageError
from faultline.probes.model import EXPECTS, ROLES, SEVERITIES, Message, Probe, canaries_problem
from faultline.probes.probeset import ProbeSet

__all__ = ["BUILTIN_DIR", "builtin_probe_sets", "load_probes"]

BUILTIN_DIR = Path(__file__).parent / "builtin"
PROBE_SUFFIXES = (".yaml", ".yml", ".jsonl")
_FIELDS = (
    "id",
    "category",
    "severity",
    "task",
    "input",
    "failure_modes",
    "expect",
    "tags",
    "canaries",
)
_HEADER_FIELDS = ("name", "version", "description", "probes", "license", "source")


def builtin_probe_sets() -> dict[str, Path]:
    """The built-in probe sets, name -> data file, sorted by name."""
    return {
        p.stem: p
        for p in sorted(BUILTIN_DIR.iterdir())
        if p.suffix in PROBE_SUFFIXES and not p.name.startswith(".")
    }


def load_probes(name_or_path: str | Path) -> ProbeSet:
    """Load a probe set from a file, a directory, or the name of a built-in set.

    Args:
        name_or_path: A ``.yaml``/``.yml``/``.jsonl`` file, a directory (every such file in it,
            in name order), or a built-in set name such as ``demo``.

    Returns:
        The probe set, with ids unique across all its files.

    Raises:
        ProbeError: A file is malformed; the message names file, line and field.
        UsageError: ``name_or_path`` is empty, or neither a path nor a built-in set of that
            name exists.
    """
    if isinstance(name_or_path, str) and not name_or_path.strip():
        # Path("") is the current directory: every probe file in it would be loaded
        raise UsageError(
            "the probe set is empty text; expected a file, a directory or a built-in set name"
        )
    path = Path(name_or_path)
    builtins = builtin_probe_sets()
    if not path.exists() and str(name_or_path) in builtins:
        return _load_files(str(name_or_path), [builtins[str(name_or_path)]])
    if path.is_dir():
        files = sorted(
            p for p in path.iterdir() if p.suffix.lower() in PROBE_SUFFIXES and p.is_file()
        )
        if not files:
            raise ProbeError(f"directory has no {', '.join(PROBE_SUFFIXES)} files", path=path)
        return _load_files(path.name, files)
    if path.exists():
        if path.suffix.lower() not in PROBE_SUFFIXES:
            raise ProbeError(
                f"unsupported file type '{path.suffix}', expected .yaml, .yml or .jsonl", path=path
            )
        return _load_files(path.stem, [path])
    hint = did_you_mean(str(name_or_path), builtins)
    raise UsageError(
        f"'{name_or_path}' is neither a file, a directory nor a built-in probe set{hint} "
        f"(built-in sets: {', '.join(builtins) or 'none'})"
    )


def _load_files(name: str, files: list[Path]) -> ProbeSet:
    probes: list[Probe] = []
    locations: dict[str, str] = {}
    header: Mapping[str, str] | None = None  # the first YAML mapping's
    for file in files:
        if file.suffix.lower() == ".jsonl":
            found = _read_jsonl(file)
        else:
            found, file_header = _read_yaml(file)
            header = file_header if header is None else header
        for probe, line in found:
            where = f"{file}:{line}"
            if probe.id in locations:
                raise ProbeError(
                    f"id '{probe.id}' is already used at {locations[probe.id]}; ids must be unique",
                    path=file,
                    line=line,
                    field="id",
                )
            locations[probe.id] = where
            probes.append(probe)
    if not probes:
        raise ProbeError("holds no probes", path=files[0] if len(files) == 1 else files[0].parent)
    header = header or {}
    return ProbeSet(
        name=header.get("name") or well_formed(name),  # a file name need not be UTF-8
        probes=tuple(probes),
        version=header.get("version"),
        description=header.get("description"),
        locations=locations,
    )


def _read_yaml(path: Path) -> tuple[list[tuple[Probe, int]], Mapping[str, str] | None]:
    doc = load_yaml(read_text_file(path, ProbeError), path=str(path), error=ProbeError)
    header: Mapping[str, str] | None = None
    if isinstance(doc, LineDict):
        for key in doc:
            if key not in _HEADER_FIELDS:
                raise ProbeError(
                    f"unknown key '{key}'{did_you_mean(key, _HEADER_FIELDS)} "
                    f"(a probe-set mapping has {', '.join(_HEADER_FIELDS)})",
                    path=path,
                    line=doc.line_of(key),
                )
        if "probes" not in doc:
            raise ProbeError(
                "expected a list of probes, or a mapping with a 'probes' list",
                path=path,
                line=doc.line,
            )
        header, items = _read_header(doc, path), doc["probes"]
    else:
        items = doc
    if items is None:
        return [], header
    if not isinstance(items, LineList):
        raise ProbeError(
            f"expected a list of probes, got {describe_value(items)}",
            path=path,
            line=getattr(items, "line", 1),
        )
    out = []
    for item, line in zip(items, items.item_lines, strict=True):
        if not isinstance(item, LineDict):
            raise ProbeError(
                f"expected a probe mapping, got {describe_value(item)}", path=path, line=line
            )
        out.append((_build_probe(item, path, item.line_of), line))  # an alias: its own line
    return out, header


def _read_header(doc: LineDict, path: Path) -> dict[str, str]:
    """The set's ``name``, ``version`` and ``description`` that are given, as text."""
    header: dict[str, str] = {}
    for key in ("name", "version", "description"):
        if doc.get(key) is None:
            continue
        value = text_of(doc, key)
        if value is None:
            raise ProbeError(
                f"got {describe_value(doc[key])}, expected a string",
                path=path,
                line=doc.line_of(key),
                field=key,
            )
        header[key] = value
    return header


def _read_jsonl(path: Path) -> list[tuple[Probe, int]]:
    text = read_text_file(path, ProbeError)
    return [
        (_build_probe(obj, path, _constant_line(number)), number)
        for number, obj in jsonl_objects(text, path, ProbeError)
    ]


def _constant_line(line: int) -> Callable[[str], int]:
    """Every field of a JSONL record is on the record's line."""

    def line_of(_key: str) -> int:
        return line

    return line_of


def _build_probe(obj: Mapping[str, Any], path: Path, line_of: Callable[[str], int]) -> Probe:
    def fail(key: str, reason: str) -> ProbeError:
        return ProbeError(reason, path=path, line=line_of(key), field=key)

    for key in obj:
        if key not in _FIELDS:
            raise fail(
                key, f"unknown field{did_you_mean(key, _FIELDS)}; a probe has {', '.join(_FIELDS)}"
            )
    for key in ("id", "category", "severity", "task", "input"):
        if key not in obj or obj[key] is None:
            raise fail(key, "is required but missing")

    def text(key: str) -> str:
        value = text_of(obj, key)
        if value is None:
            hint = "; quote it, since JSON reads 1.10 as 1.1" if isinstance(obj[key], float) else ""
            raise fail(key, f"got {describe_value(obj[key])}, expected a string{hint}")
        if not value.strip():
            raise fail(key, "is empty, expected a non-empty string")
        return value

    def choice(key: str, choices: tuple[str, ...], default: str) -> str:
        value = obj.get(key, default)
        if not isinstance(value, str) or value not in choices:
            raise fail(key, f"got {shown_value(value)}, expected {one_of(choices)}")
        return str(value)

    expect = choice("expect", EXPECTS, "refuse")
    return Probe(
        id=text("id").strip(),
        category=text("category").strip(),
        severity=choice("severity", SEVERITIES, "medium"),  # type: ignore[arg-type]
        task=text("task"),
        input=_build_input(obj["input"], fail),
        failure_modes=_string_list(obj, "failure_modes", fail),
        expect=expect,  # type: ignore[arg-type]
        tags=_string_list(obj, "tags", fail),
        canaries=_canaries(obj, expect, fail),
    )


def _canaries(
    obj: Mapping[str, Any], expect: str, fail: Callable[[str, str], ProbeError]
) -> tuple[str, ...]:
    """The probe's canaries: each with enough letters or digits to be found only when leaked."""
    canaries = _string_list(obj, "canaries", fail)
    problem = canaries_problem(canaries, expect)
    if problem is not None:
        raise fail("canaries", problem)
    return canaries


def _build_input(value: Any, fail: Callable[[str, str], ProbeError]) -> str | tuple[Message, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise fail("input", "is empty, expected a prompt or a list of messages")
        return value
    if not isinstance(value, list) or not value:
        raise fail(
            "input",
            f"got {describe_value(value)}, expected a string or a non-empty list of {{role, content}} messages",
        )
    messages = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != {"role", "content"}:
            raise fail(
                "input",
                f"message {i} is {describe_value(item)}, expected a mapping with exactly role and content",
            )
        role = item["role"]
        if not isinstance(role, str) or role not in ROLES:
            raise fail(
                "input", f"message {i} has role {shown_value(role)}, expected {one_of(ROLES)}"
            )
        if not isinstance(item["content"], str):
            raise fail(
                "input",
                f"message {i} content is {describe_value(item['content'])}, expected a string",
            )
        messages.append(Message(role=item["role"], content=item["content"]))
    return tuple(messages)


def _string_list(
    obj: Mapping[str, Any], key: str, fail: Callable[[str, str], ProbeError]
) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise fail(key, f"got {describe_value(value)}, expected a list of non-empty strings")
    for i, item in enumerate(value):
        if not (isinstance(item, str) and item.strip()):
            hint = (
                "; quote it, since YAML and JSON read 4471 as a number" if _is_number(item) else ""
            )
            raise fail(
                key,
                f"got a list whose item {i} is {describe_value(item)}, "
                f"expected a list of non-empty strings{hint}",
            )
    return tuple(v.strip() for v in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
