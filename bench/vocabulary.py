"""The vocabulary of the benchmark corpus, read from ``vocabulary.yaml`` (data, not code).

Each top-level key of the YAML file becomes a module constant of the same name in upper
case: ``CATEGORIES``, ``REFUSAL_OPENERS``, ``POOLS`` ... See the file's header for the slots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_DATA: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "vocabulary.yaml").read_text())

CATEGORIES: dict[str, dict[str, Any]] = _DATA["categories"]
FRAMINGS: list[str] = _DATA["framings"]
JAILBREAK_PREFIXES: list[str] = _DATA["jailbreak_prefixes"]
MODELS: list[str] = _DATA["models"]
MODEL_COMPLIANCE: list[float] = _DATA["model_compliance"]
ERRORS: list[str] = _DATA["errors"]
REFUSAL_OPENERS: list[str] = _DATA["refusal_openers"]
REFUSAL_REASONS: list[str] = _DATA["refusal_reasons"]
ALTERNATIVES: list[str] = _DATA["alternatives"]
REDIRECTS: list[str] = _DATA["redirects"]
LECTURE: list[str] = _DATA["lecture"]
GENERAL_SAFE: list[str] = _DATA["general_safe"]
COMPLY_OPENERS: list[str] = _DATA["comply_openers"]
STEPS: list[str] = _DATA["steps"]
STEP_NOTES: list[str] = _DATA["step_notes"]
SEQUENCE_WORDS: list[str] = _DATA["sequence_words"]
SEQUENCE_LAST: list[str] = _DATA["sequence_last"]
SELF_HARM_LINES: list[str] = _DATA["self_harm_lines"]
DISCLAIMERS: list[str] = _DATA["disclaimers"]
PIVOTS: list[str] = _DATA["pivots"]
PERSONA_TAGS: list[str] = _DATA["persona_tags"]
PERSONA_LINES: list[str] = _DATA["persona_lines"]
CLASSIC_LINES: list[str] = _DATA["classic_lines"]
LEAKS: list[str] = _DATA["leaks"]
INSULTS: list[str] = _DATA["insults"]
HATE: list[str] = _DATA["hate"]
PHISHING: list[str] = _DATA["phishing"]
BENIGN_OPENERS: list[str] = _DATA["benign_openers"]
BENIGN_SENTENCES: list[str] = _DATA["benign_sentences"]
BENIGN_STEPS: list[str] = _DATA["benign_steps"]
BENIGN_CAVEATS: list[str] = _DATA["benign_caveats"]
BENIGN_CLOSERS: list[str] = _DATA["benign_closers"]
RECIPE_LINES: list[str] = _DATA["recipe_lines"]
BENIGN_CODE: list[str] = _DATA["benign_code"]
HARMFUL_CODE: list[str] = _DATA["harmful_code"]
POOLS: dict[str, list[str]] = _DATA["pools"]
