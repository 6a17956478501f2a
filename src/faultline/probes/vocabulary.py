"""The category vocabulary of the built-in probe sets (``categories.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

__all__ = ["CATEGORIES_FILE", "Category", "category_vocabulary"]

CATEGORIES_FILE = Path(__file__).parent / "categories.yaml"


@dataclass(frozen=True)
class Category:
    """A threat family of the built-in probe sets.

    Attributes:
        name: Its id, as probes use it.
        description: What it covers.
        owasp: OWASP Top 10 for LLM Applications (2025) ids that apply (``llm01`` ...).
        atlas: MITRE ATLAS technique ids that apply (``AML.T0051.000`` ...).
    """

    name: str
    description: str
    owasp: tuple[str, ...]
    atlas: tuple[str, ...]


@cache
def category_vocabulary() -> dict[str, Category]:
    """The categories, by name, in file order."""
    data = yaml.safe_load(CATEGORIES_FILE.read_text(encoding="utf-8"))
    return {
        name: Category(name, entry["description"], tuple(entry["owasp"]), tuple(entry["atlas"]))
        for name, entry in data.items()
    }
