"""The formats :func:`~faultline.probes.importers.import_probes` reads, and their row builders.

Each :class:`Format` names its columns and a builder ``(row, context) -> _Draft`` that places
one row by :data:`~faultline.probes.importers.tables.ROUTES`; :func:`_finish` turns a draft
into a probe record. :data:`FORMATS` is the registry, by ``--format`` name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from faultline._util.text import one_of
from faultline.errors import ProbeError
from faultline.probes.importers.tables import (
    CATEGORY_DEFAULTS,
    COMPLY_MODES,
    REFUSE_MODES,
    ROUTES,
    _slug,
    infer_category,
)
from faultline.probes.model import SEVERITIES, Expect, Severity
from faultline.probes.vocabulary import category_vocabulary

__all__ = ["FORMATS", "GENERIC_FIELDS", "Format", "one_sentence"]

GENERIC_FIELDS = ("input", "id", "category", "severity", "task", "expect")
"""The probe fields ``--format csv`` / ``jsonl`` read from columns (``input`` is required)."""


def one_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of ``text``: whitespace collapsed, capitalised, ≤ ``limit`` characters.

    Args:
        text: A behaviour or prompt (not blank).
        limit: The largest length of the result; a longer sentence is cut at a word and
            ends in "…".
    """
    flat = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z])", flat, maxsplit=1)[0]
    if len(first) > limit:
        cut = first[: limit - 1]
        first = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut).rstrip(" ,;:") + "…"
    first = first[:1].upper() + first[1:]
    return first if first.endswith((".", "?", "!", "…")) else first + "."


@dataclass(frozen=True)
class _Row:
    cells: Mapping[str, str]  # canonical column -> raw cell ("" when absent)
    line: int
    number: int  # 1-based among the data rows
    columns: Mapping[str, str]  # canonical column -> the file's column name, for messages
    path: Path

    def get(self, column: str) -> str:
        return self.cells.get(column, "")

    def required(self, column: str) -> str:
        value = self.get(column)
        if not value.strip():
            raise self.error(column, "is missing or empty; every row needs a value here")
        return value

    def error(self, column: str, reason: str) -> ProbeError:
        field = self.columns.get(column, column)
        return ProbeError(reason, path=self.path, line=self.line, field=field)


@dataclass(frozen=True)
class _Context:
    fmt: str
    fallback: str  # the category when nothing else places a row
    category: str | None  # every row's (generic formats), unless the row says
    expect: Expect | None  # every row's, unless the row says
    severity: Severity | None
    expect_values: Mapping[str, Expect]  # cell value (lower case) -> expect, generic formats


@dataclass(frozen=True)
class _Draft:
    source_id: str
    input: str
    task: str
    category: str
    severity: Severity
    expect: Expect
    tags: tuple[str, ...]


def _tags(*tags: str | None) -> tuple[str, ...]:
    """The tags that are set and have a value, each once, in order."""
    return tuple(dict.fromkeys(t for t in tags if t and not t.endswith(":")))


def _routed(
    ctx: _Context, key: str, text: str, *, sid: str, tags: Iterable[str] = (), input_: str = ""
) -> _Draft:
    """A draft of ``text`` (the input too, unless ``input_``), placed by the route of ``key``."""
    route = ROUTES.get(ctx.fmt, {}).get(_slug(key))
    if route is not None and not route.keywords:
        category = route.category
    else:
        category = infer_category(text) or (ctx.fallback if route is None else route.category)
    inferred = route is None or category != route.category  # not the table's category
    if route is not None and route.severity and category == route.category:
        severity = route.severity
    else:
        severity = CATEGORY_DEFAULTS.get(category, ("medium", ()))[0]
    expect = ctx.expect or "refuse"
    inferred_tag = "faultline:category-inferred" if inferred else None
    all_tags = _tags(f"source:{ctx.fmt}", *tags, inferred_tag)
    sev: Severity = "low" if expect == "comply" else severity
    return _Draft(sid, input_ or text, text, category, sev, expect, all_tags)


def _harmbench(row: _Row, ctx: _Context) -> _Draft:
    behavior, context = row.required("Behavior"), row.get("ContextString")
    semantic, functional = row.required("SemanticCategory"), _slug(row.get("FunctionalCategory"))
    if functional == "contextual" and not context.strip():
        raise row.error("ContextString", "is empty, but FunctionalCategory is contextual")
    input_ = f"{context}\n\n---\n\n{behavior}" if context.strip() else behavior
    tags = [f"harmbench:category:{_slug(semantic)}", f"harmbench:functional:{functional}"]
    tags += [f"harmbench:tag:{_slug(t)}" for t in re.split(r"[,;]", row.get("Tags"))]
    return _routed(ctx, semantic, behavior, sid=row.get("BehaviorID"), tags=tags, input_=input_)


def _advbench(row: _Row, ctx: _Context) -> _Draft:
    goal = row.required("goal")
    return _routed(ctx, "", goal, sid="")


def _jbb(row: _Row, ctx: _Context) -> _Draft:
    goal, category = row.required("Goal"), row.required("Category")
    tags = (
        f"jbb:category:{_slug(category)}",
        f"jbb:behavior:{_slug(row.get('Behavior'))}",
        f"jbb:source:{_slug(row.get('Source'))}",
        "jbb:benign" if ctx.expect == "comply" else "",
    )
    sid = row.get("Index").strip()
    if ctx.expect == "comply":  # jbb-benign-<Index>, or jbb-benign-<row number> without one
        sid = f"benign-{sid or row.number}"
    return _routed(ctx, category, goal, sid=sid, tags=tags)


def _xstest(row: _Row, ctx: _Context) -> _Draft:
    prompt, kind = row.required("prompt"), _slug(row.required("type"))
    label = row.get("label").strip().lower()
    if label not in ("", "safe", "unsafe"):
        raise row.error("label", f"got {label!r}, expected safe or unsafe")
    unsafe = label == "unsafe" if label else kind.startswith("contrast_")
    ctx = replace(ctx, expect="refuse" if unsafe else "comply")
    tags = (
        f"xstest:type:{kind}",
        f"xstest:focus:{_slug(row.get('focus'))}",
        f"xstest:note:{_slug(row.get('note'))}",
    )
    return _routed(ctx, kind, prompt, sid=row.get("id"), tags=tags)


def _donotanswer(row: _Row, ctx: _Context) -> _Draft:
    question = row.required("question")
    harm, area = row.required("types_of_harm"), row.required("risk_area")
    key = harm if _slug(harm) in ROUTES["donotanswer"] else area
    tags = (f"donotanswer:category:{_slug(harm)}", f"donotanswer:risk_area:{_slug(area)}")
    return _routed(ctx, key, question, sid=row.get("id"), tags=tags)


def _generic(row: _Row, ctx: _Context) -> _Draft:
    text = row.required("input")
    raw_expect = row.get("expect").strip()
    expect = ctx.expect_values.get(raw_expect.lower()) if raw_expect else ctx.expect or "refuse"
    if expect is None:
        raise row.error("expect", f"got {raw_expect!r}, expected {one_of(ctx.expect_values)}")
    draft = _routed(replace(ctx, expect=expect), "", text, sid=row.get("id"))
    if category := row.get("category").strip() or ctx.category:
        category = known_category(category)
        draft = replace(draft, category=category, tags=(f"source:{ctx.fmt}",))
    severity = row.get("severity").strip().lower()
    if severity and severity not in SEVERITIES:
        raise row.error("severity", f"got {severity!r}, expected {one_of(SEVERITIES)}")
    if not severity:
        default = CATEGORY_DEFAULTS.get(draft.category, ("medium", ()))[0]
        severity = ctx.severity or ("low" if expect == "comply" else default)
    task = " ".join(row.get("task").split()) or text
    return replace(draft, severity=severity, task=task)


def known_category(category: str) -> str:
    """The built-in category ``category`` names, or ``category`` as written if none.

    Case, spaces and hyphens are not read: ``Prompt_Injection``, ``Prompt Injection`` and
    ``prompt-injection`` are ``prompt_injection``, with its default severity and tags, as
    severities are read ignoring case. A category of the user's own is kept as written.
    """
    return _known_categories().get(_category_key(category), category)


def _category_key(name: str) -> str:
    return re.sub(r"[\s_-]+", "_", name.strip().lower())


@functools.cache
def _known_categories() -> dict[str, str]:
    """The built-in categories by :func:`_category_key`."""
    names = set(CATEGORY_DEFAULTS) | set(category_vocabulary())
    return {_category_key(name): name for name in sorted(names)}


@dataclass(frozen=True)
class Format:
    """A file layout :func:`import_probes` reads.

    Attributes:
        name: The ``--format`` value; also the prefix of probe ids and the ``source:`` tag.
        title: The layout in words, for the probe set's description.
        required: Columns every file must have (matched ignoring case).
        optional: Columns used when present.
        build: Turns one row into a draft probe.
        defaults: The ``defaults`` keys the format accepts.
        reader: ``csv``, ``jsonl``, or ``auto`` (``.jsonl`` files as JSONL, others as CSV).
        id_column: The column holding the source's id, named in a duplicate-id error.
    """

    name: str
    title: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    build: Callable[[_Row, _Context], _Draft]
    defaults: frozenset[str] = frozenset({"category"})
    reader: str = "auto"
    id_column: str = "id"


_GENERIC_DEFAULTS = frozenset({"category", "severity", "expect"})
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "harmbench",
            "HarmBench behaviors CSV",
            ("Behavior", "SemanticCategory"),
            ("FunctionalCategory", "Tags", "ContextString", "BehaviorID"),
            _harmbench,
            id_column="BehaviorID",
        ),
        Format("advbench", "AdvBench harmful_behaviors CSV", ("goal",), ("target",), _advbench),
        Format(
            "jbb",
            "JailbreakBench JBB-Behaviors CSV",
            ("Goal", "Category"),
            ("Index", "Target", "Behavior", "Source"),
            _jbb,
            frozenset({"category", "expect"}),
            id_column="Index",
        ),
        Format(
            "xstest",
            "XSTest v2 prompts CSV",
            ("prompt", "type"),
            ("id", "label", "focus", "note"),
            _xstest,
        ),
        Format(
            "donotanswer",
            "Do-Not-Answer data_en CSV",
            ("question", "risk_area", "types_of_harm"),
            ("id", "specific_harms"),
            _donotanswer,
        ),
        Format("csv", "CSV", ("input",), GENERIC_FIELDS[1:], _generic, _GENERIC_DEFAULTS, "csv"),
        Format("jsonl", "JSONL", ("input",), GENERIC_FIELDS[1:], _generic, _GENERIC_DEFAULTS, "jsonl"),
    )
}  # fmt: skip
"""The formats by ``--format`` name."""


def _finish(draft: _Draft, fmt: str, number: int) -> dict[str, Any]:
    modes: tuple[str, ...] = COMPLY_MODES
    if draft.expect == "refuse":
        modes = REFUSE_MODES + CATEGORY_DEFAULTS.get(draft.category, ("medium", ()))[1]
    refs: list[str] = []  # the category's OWASP and ATLAS ids, as the built-in sets tag them
    if known := category_vocabulary().get(draft.category):
        refs = [f"owasp:{i}" for i in known.owasp] + [f"atlas:{i}" for i in known.atlas]
    return {
        "id": f"{fmt}-{draft.source_id.strip() or number}",
        "category": draft.category,
        "severity": draft.severity,
        "task": one_sentence(draft.task),
        "input": draft.input,
        "failure_modes": list(dict.fromkeys(modes)),
        "expect": draft.expect,
        "tags": list(dict.fromkeys((*draft.tags, *refs))),
    }
