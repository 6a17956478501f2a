"""The mapping tables of the importers, read from ``tables.yaml``.

:data:`CATEGORY_DEFAULTS` gives each faultline category its default severity and failure
modes; :data:`ROUTES` sends each format's source categories to a faultline category;
:data:`KEYWORD_RULES` places rows whose source category is broad, or missing. The tables are
data: edit ``tables.yaml`` (and docs/probes.md, which a test holds to them), not this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from faultline._util.yamlsrc import load_yaml
from faultline.errors import ProbeError
from faultline.probes.model import Severity

__all__ = [
    "CATEGORY_DEFAULTS",
    "COMPLY_MODES",
    "GENERAL_CATEGORY",
    "KEYWORD_RULES",
    "REFUSE_MODES",
    "ROUTES",
    "TABLES_FILE",
    "Route",
    "infer_category",
]

TABLES_FILE = Path(__file__).parent / "tables.yaml"
"""The data file holding the category, route and keyword tables."""

REFUSE_MODES = (
    "unrefused_request",
    "refusal_then_compliance",
    "affirmative_compliance",
    "disclaimed_compliance",
)
"""The failure modes of every harmful probe, before its category's own."""
COMPLY_MODES = ("over_refusal", "partial_refusal")
"""The failure modes of every benign control (``expect: comply``); its severity is ``low``."""
GENERAL_CATEGORY = "general_harm"
"""Where a harmful row goes when neither its source category nor a keyword places it."""


@dataclass(frozen=True)
class Route:
    """Where one source category goes.

    Attributes:
        category: The faultline category; with ``keywords``, the fallback.
        severity: Overrides the category's default severity (:data:`CATEGORY_DEFAULTS`).
        keywords: The source category is broad: try :data:`KEYWORD_RULES` first.
    """

    category: str
    severity: Severity | None = None
    keywords: bool = False


def _slug(text: str) -> str:
    return re.sub(r"\W+", "_", text.strip().lower()).strip("_")


def _load_tables() -> dict[str, Any]:
    text = TABLES_FILE.read_text(encoding="utf-8")
    return cast("dict[str, Any]", load_yaml(text, path=str(TABLES_FILE), error=ProbeError))


_TABLES = _load_tables()

CATEGORY_DEFAULTS: dict[str, tuple[Severity, tuple[str, ...]]] = {
    name: (cast("Severity", severity), tuple(modes))
    for name, (severity, modes) in _TABLES["categories"].items()
}
"""category -> (default severity, failure modes beyond :data:`REFUSE_MODES`)."""


def _parse_routes(table: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Route]]:
    return {
        fmt: {
            _slug(source): Route(
                entry["category"],
                cast("Severity | None", entry.get("severity")),
                bool(entry.get("keywords", False)),
            )
            for source, entry in sources.items()
        }
        for fmt, sources in table.items()
    }


ROUTES: dict[str, dict[str, Route]] = _parse_routes(_TABLES["routes"])
"""format -> slugged source category -> :class:`Route`."""

# (category, pattern), tried in order on the behaviour or prompt; the first match wins.
KEYWORD_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(r"\b(?:" + "|".join(patterns) + ")", re.IGNORECASE))
    for rule in _TABLES["keyword_rules"]
    for name, patterns in rule.items()
)


def infer_category(text: str, fallback: str | None = None) -> str | None:
    """The category of the first :data:`KEYWORD_RULES` entry matching ``text``, or ``fallback``."""
    return next((name for name, rx in KEYWORD_RULES if rx.search(text)), fallback)
