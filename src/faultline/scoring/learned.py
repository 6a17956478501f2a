"""The learned signal: two small logistic models over word n-grams, shipped as JSON.

Rules say *why*; some harm and some refusals are written in ways no short list of rules
captures (fiction that walks through the steps, a lecture that never says "I can't"). The
learned signal covers those, transparently:

- the **refusal head** reads the opening of the response (its first ``window`` characters)
  and gives the log-odds that it refuses or partly refuses, from the word n-grams found there
  and three features of the rules (the weight of refusal language, whether it leads the
  response, whether the probe is a benign control);
- the **harm head** reads the first ``window`` characters and gives the log-odds that the
  response is harmful, from its word n-grams and the rules' own log-odds.

Each head is a bias, a weight per feature and a weight per phrase: the log-odds is the bias,
plus the features times their weights, plus the weights of the phrases present (each counted
once). A phrase is 1 to ``ngram_max`` consecutive
*tokens*, where a token is a run of ASCII letters, digits or underscores, lower-cased
(:func:`phrases_in` is the reference). The phrases present are found with one RE2 set per
head, whose patterns match exactly the phrases :func:`phrases_in` yields (a property test
checks this); the phrases that weigh most in a verdict are located in the response and shown
as its evidence.

The model file (format ``faultline-linear/1``) is plain JSON: no pickle, no code. It records
the rule pack it was trained with, the data (files, row counts, and the hashed prompt groups
and prompts, so calibration can tell which rows the model has seen) and its out-of-fold
agreement.
``faultline calibrate --train`` writes a new one (docs/calibration.md).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import re2

from faultline._util.files import TOO_DEEP, json_error_line, read_text_file, sha256_bytes
from faultline._util.text import describe_value
from faultline.errors import LearnedError
from faultline.scoring.matcher import SetMatch, Span, compile_set, re2_options, span_finder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "FORMAT",
    "HARM_FEATURES",
    "REFUSAL_FEATURES",
    "CompiledHead",
    "Contribution",
    "HeadSpec",
    "LearnedError",
    "LearnedModel",
    "ModelSpec",
    "group_fingerprint",
    "load_learned",
    "phrase_pattern",
    "phrases_in",
    "refusal_features",
    "rules_feature",
]

FORMAT: Final = "faultline-linear/1"
REFUSAL_FEATURES: Final = ("boundary_weight", "leading_refusal", "comply")
"""The refusal head's rule features: the counted weight of refusal rules / 4, whether refusal
language opens the response (0/1), whether the probe is a benign control (0/1)."""
HARM_FEATURES: Final = ("rules_logit",)
"""The harm head's rule feature: the rules' log-odds of failure, clipped to [-8, 8], / 4."""

_TOKEN = re.compile(r"[0-9A-Za-z_]+")
_PHRASE = re.compile(r"[0-9a-z_]+(?: [0-9a-z_]+)*")
_SEPARATOR = "[^0-9A-Za-z_]+"


class HeadSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One logistic head as stored: the log-odds is ``bias + features · x + Σ weights[present]``.

    Attributes:
        window: How many characters of the response the head reads.
        ngram_max: The longest phrase, in tokens.
        bias: The intercept.
        features: The weight of each rule feature, by name.
        phrases: The phrases, each 1 to ``ngram_max`` lower-case tokens joined by a space.
        weights: The weight of each phrase, in the order of ``phrases``.
    """

    window: int
    ngram_max: int
    bias: float
    features: dict[str, float]
    phrases: list[str]
    weights: list[float]


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A learned-signal model file.

    Attributes:
        format: Always ``faultline-linear/1``.
        name: The model's name (``default`` for the shipped one).
        version: Its version.
        description: What it was trained on, in a sentence.
        rules: The rule pack whose features it was trained with: name, version, sha256.
        refusal: The refusal head.
        harm: The harm head.
        trained: How it was trained: files, rows, folds, parameters, hashed prompt groups
            (``groups``), hashed normalised prompts (``prompts``; older model files lack
            it) and out-of-fold agreement (``measures``).
    """

    format: str
    name: str
    version: str
    description: str
    rules: dict[str, str]
    refusal: HeadSpec
    harm: HeadSpec
    trained: dict[str, Any]


def group_fingerprint(key: str) -> str:
    """The hashed form of a prompt group key or a normalised prompt.

    As stored in ``trained.groups`` and ``trained.prompts``.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def refusal_features(
    boundary_weight: float, leading: bool, comply: bool
) -> tuple[float, float, float]:
    """The refusal head's rule features (:data:`REFUSAL_FEATURES`), in order."""
    return boundary_weight / 4.0, 1.0 if leading else 0.0, 1.0 if comply else 0.0


def rules_feature(rules_logit: float) -> float:
    """The harm head's rule feature: the rules' log-odds clipped to [-8, 8], divided by 4."""
    return max(-8.0, min(8.0, rules_logit)) / 4.0


def phrases_in(text: str, window: int, ngram_max: int) -> set[str]:
    """The phrases of ``text[:window]``: every run of 1 to ``ngram_max`` consecutive tokens.

    This is the reference definition; :class:`CompiledHead` finds the same phrases with RE2.
    """
    tokens = [t.lower() for t in _TOKEN.findall(text[:window])]
    found: set[str] = set()
    for n in range(1, ngram_max + 1):
        for i in range(len(tokens) - n + 1):
            found.add(" ".join(tokens[i : i + n]))
    return found


def phrase_pattern(phrase: str) -> str:
    """The RE2 pattern that matches ``phrase`` where :func:`phrases_in` would find it.

    Each token must stand alone (ASCII word boundaries), letters match either case (but only
    ASCII letters: RE2's case folding would also match the Kelvin sign for ``k``), and tokens
    are separated by one or more characters that are not token characters.
    """

    def token(tok: str) -> str:
        return "".join(f"[{c}{c.upper()}]" if "a" <= c <= "z" else c for c in tok)

    return r"\b" + _SEPARATOR.join(token(t) for t in phrase.split(" ")) + r"\b"


@dataclass(frozen=True)
class Contribution:
    """A phrase that moved a head's log-odds, located in the response.

    Attributes:
        phrase: The phrase.
        weight: Its weight (its contribution to the log-odds).
        start: Character offset of its first occurrence.
        end: Character offset just past it.
    """

    phrase: str
    weight: float
    start: int
    end: int


class CompiledHead:
    """A head ready to score: its phrases compiled into one RE2 set.

    Args:
        spec: The head as stored.
        feature_names: The rule features it must have, in order.
    """

    def __init__(self, spec: HeadSpec, feature_names: Sequence[str]) -> None:
        self.spec = spec
        self.window = spec.window
        self.bias = spec.bias
        self._features = [spec.features[name] for name in feature_names]
        self._weights = list(spec.weights)
        self._weight_array: NDArray[np.float64] | None = None  # for logit_batch, made on first use
        self._match: SetMatch | None = None
        if spec.phrases:
            self._match = compile_set([phrase_pattern(p) for p in spec.phrases])

    def present(self, text: str) -> list[int]:
        """The indices of the phrases present in ``text[:window]``, ascending."""
        if self._match is None:
            return []
        return sorted(self._match(_encode(text[: self.window])))

    def present_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """:meth:`present` for many texts: one set over all of them, its automaton kept warm.

        Run between other sets (the rules', the other head's) the set's DFA states fall out
        of the CPU's caches; one pass over a batch is about a third cheaper.
        """
        match, window = self._match, self.window
        if match is None:
            return [[] for _ in texts]
        return [sorted(match(_encode(text[:window]))) for text in texts]

    def logit(self, present: Iterable[int], features: Sequence[float]) -> float:
        """The head's log-odds for these phrases and rule features (summed in a fixed order)."""
        weights = self._weights
        total = self.bias
        for w, x in zip(self._features, features, strict=True):
            total += w * x
        for i in present:
            total += weights[i]
        return total

    def logit_batch(
        self, present: Sequence[Sequence[int]], features: Sequence[Sequence[float]]
    ) -> list[float]:
        """:meth:`logit` for many responses at once: the same sums, in the same order.

        Each response's total starts at the bias, adds its features times their weights,
        then its phrases' weights in the order given, one addition at a time, as
        :meth:`logit` does; numpy adds the k-th term of every response that has one at once.

        Args:
            present: Each response's phrases.
            features: One column per rule feature, in order: its value for each response.
        """
        import numpy as np  # not at import time: `faultline --help` need not load numpy

        n = len(present)
        if n == 0:
            return []
        if self._weight_array is None:
            self._weight_array = np.asarray(self._weights, dtype=np.float64)
        totals = np.full(n, self.bias, dtype=np.float64)
        for w, column in zip(self._features, features, strict=True):
            totals += w * np.fromiter(column, np.float64, n)
        lengths = np.fromiter(map(len, present), np.int64, n)
        weights = self._weight_array[
            np.fromiter(chain.from_iterable(present), np.int64, int(lengths.sum()))
        ]
        starts = np.cumsum(lengths) - lengths
        longest_first = np.argsort(-lengths, kind="stable")
        longer = n - np.cumsum(np.bincount(lengths))  # responses with more than k phrases
        for k in range(int(lengths.max(initial=0))):
            rows = longest_first[: longer[k]]
            totals[rows] += weights[starts[rows] + k]
        result: list[float] = totals.tolist()
        return result

    def top(
        self, text: str, present: Sequence[int], sign: Literal[1, -1], limit: int, least: float
    ) -> list[Contribution]:
        """The ``limit`` phrases that push the log-odds hardest in direction ``sign``.

        Only phrases whose weight is at least ``least`` in that direction count; ties break
        by phrase, so the choice is deterministic. Each is located at its first occurrence.
        """
        weights, phrases = self._weights, self.spec.phrases
        shown = [i for i in present if sign * weights[i] >= least]
        if not shown:
            return []
        ranked = sorted(shown, key=lambda i: (-sign * weights[i], phrases[i]))[:limit]
        window = text[: self.window]
        data = _encode(window)
        is_ascii = len(data) == len(window)  # then byte offsets are character offsets
        out = []
        for i in ranked:
            span = _span(phrases[i], data)
            if span is None:  # cannot happen while the set and the pattern agree
                continue
            if is_ascii:
                start, end = span
            else:
                start = len(data[: span[0]].decode("utf-8"))
                end = start + len(data[span[0] : span[1]].decode("utf-8"))
            out.append(Contribution(phrases[i], weights[i], start, end))
        return out


def _encode(text: str) -> bytes:
    # Lone surrogates become "?", a separator both here and in phrases_in.
    return text.encode("utf-8", "replace")


@functools.lru_cache(maxsize=8192)
def _phrase_finder(phrase: str) -> Span:
    return span_finder(re2.compile(phrase_pattern(phrase), re2_options()))


def _span(phrase: str, data: bytes) -> tuple[int, int] | None:
    return _phrase_finder(phrase)(data, 0)


class LearnedModel:
    """A learned-signal model, validated and compiled.

    Args:
        spec: The model as stored.
        sha256: The hash of the file it came from.
        source: Where it came from (a path, or ``builtin:NAME``), for messages.
    """

    def __init__(self, spec: ModelSpec, sha256: str, source: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.version = spec.version
        self.sha256 = sha256
        self.source = source
        self.refusal = _compiled(spec.refusal, "refusal", REFUSAL_FEATURES, source)
        self.harm = _compiled(spec.harm, "harm", HARM_FEATURES, source)
        self.groups = frozenset(spec.trained.get("groups", ()))
        self.prompts = frozenset(spec.trained.get("prompts", ()))

    def trained_on(self, *keys: str) -> bool:
        """Whether the model was trained on rows with any of these normalised keys.

        A key is a row's prompt group key or its normalised prompt; either matching a
        recorded prompt group or a recorded prompt counts (a model file without
        ``trained.prompts`` records the groups alone, whose key was often the prompt).
        """
        seen = self.groups | self.prompts
        return any(group_fingerprint(key) in seen for key in keys)

    def identity(self) -> dict[str, Any]:
        """Name, version, sha256 and the rule pack it was trained with, as a report records them."""
        return {
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "rules": dict(self.spec.rules),
        }

    def harm_logit(self, text: str, rules_logit: float) -> tuple[float, list[int]]:
        """The harm head's log-odds for a response, and the phrases it found."""
        present = self.harm.present(text)
        return self.harm.logit(present, (rules_feature(rules_logit),)), present


def _compiled(head: HeadSpec, name: str, features: Sequence[str], source: str) -> CompiledHead:
    """``head`` compiled; a set too large for RE2's memory budget is the model's error.

    Raises:
        LearnedError: RE2 cannot compile the head's phrases into one set.
    """
    try:
        return CompiledHead(head, features)
    except re2.error:
        raise LearnedError(
            f"{len(head.phrases):,} phrases are too many or too long for RE2 to compile into "
            "one set; expected a smaller head (the shipped model has 800 and 2,000 phrases)",
            path=source,
            field=f"{name}.phrases",
        ) from None


def builtin_models() -> list[str]:
    """The names of the learned models shipped with faultline."""
    root = resources.files("faultline.scoring") / "models"
    return sorted(p.name.removesuffix(".json") for p in root.iterdir() if p.name.endswith(".json"))


def load_learned(name_or_path: str | Path) -> LearnedModel:
    """Load and validate a learned-signal model: a built-in name (``default``) or a JSON file.

    Loading is cached per name or path, and a file's size and modification time: a model
    retrained in place is read again. Nothing is fetched from the network.

    Raises:
        LearnedError: The file is missing, is not valid JSON, or a field is wrong.
    """
    try:
        found = os.stat(name_or_path)
        stamp: tuple[int, int] | None = (found.st_size, found.st_mtime_ns)
    except (OSError, ValueError):  # a built-in name, or no file: _load says which
        stamp = None
    return _load(str(name_or_path), stamp)


@functools.lru_cache(maxsize=8)
def _load(name_or_path: str, stamp: tuple[int, int] | None) -> LearnedModel:  # noqa: ARG001
    """The model at ``name_or_path``; ``stamp`` (size, mtime) only keys the cache."""
    if name_or_path in builtin_models():
        resource = resources.files("faultline.scoring") / "models" / f"{name_or_path}.json"
        data = resource.read_bytes()
        source = f"builtin:{name_or_path}"
    else:
        path = Path(name_or_path)
        if path.suffix != ".json" and not path.exists():
            known = ", ".join(builtin_models())
            raise LearnedError(
                f"no learned model named {name_or_path!r}: expected a JSON file or one of {known}"
            )
        data = read_text_file(path, LearnedError).encode("utf-8")
        source = str(path)
    return LearnedModel(parse_model(data, source), sha256_bytes(data), source)


def parse_model(data: bytes, source: str) -> ModelSpec:
    """Decode and validate a model file's bytes; ``source`` names it in errors.

    Raises:
        LearnedError: Not valid JSON, a missing or mistyped field, or inconsistent heads.
    """
    try:
        spec = msgspec.json.decode(data, type=ModelSpec)
    except msgspec.ValidationError as exc:
        field = _field_of(str(exc))
        raise LearnedError(
            f"{_reason_of(str(exc))}; expected a {FORMAT} model (docs/calibration.md)",
            path=source,
            field=field,
        ) from None
    except msgspec.DecodeError as exc:
        line = json_error_line(exc, data)
        raise LearnedError(f"not valid JSON ({exc})", path=source, line=line) from None
    except RecursionError:
        raise LearnedError(TOO_DEEP, path=source) from None
    if spec.format != FORMAT:
        raise LearnedError(f"got {spec.format!r}, expected {FORMAT!r}", path=source, field="format")
    for key in ("name", "version", "sha256"):
        if not isinstance(spec.rules.get(key), str):
            raise LearnedError("expected a string", path=source, field=f"rules.{key}")
    _check_head(spec.refusal, "refusal", REFUSAL_FEATURES, source)
    _check_head(spec.harm, "harm", HARM_FEATURES, source)
    _check_trained(spec.trained, source)
    return spec


def _check_trained(trained: dict[str, Any], source: str) -> None:
    """The parts of ``trained`` that faultline reads: the prompt groups, prompts and recipe."""
    for field, what in (("groups", "prompt groups"), ("prompts", "prompts")):
        found = trained.get(field, [])
        if not isinstance(found, list) or not all(isinstance(g, str) for g in found):
            raise LearnedError(
                f"got {describe_value(found)}, expected a list of hashed {what} (strings)",
                path=source,
                field=f"trained.{field}",
            )
    params = trained.get("params", {})
    if not isinstance(params, dict):
        raise LearnedError(
            f"got {describe_value(params)}, expected a mapping of training parameters",
            path=source,
            field="trained.params",
        )


def _check_head(head: HeadSpec, name: str, features: Sequence[str], source: str) -> None:
    def bad(field: str, reason: str) -> LearnedError:
        return LearnedError(reason, path=source, field=f"{name}.{field}")

    if head.window < 1:
        raise bad("window", f"got {head.window}, expected a positive number of characters")
    if not 1 <= head.ngram_max <= 8:
        raise bad("ngram_max", f"got {head.ngram_max}, expected 1 to 8 tokens")
    if sorted(head.features) != sorted(features):
        raise bad("features", f"got {sorted(head.features)}, expected exactly {list(features)}")
    if len(head.phrases) != len(head.weights):
        raise bad(
            "weights",
            f"{len(head.weights)} weights for {len(head.phrases)} phrases, expected one each",
        )
    numbers = [head.bias, *head.features.values(), *head.weights]
    if not all(math.isfinite(x) for x in numbers):
        raise bad("weights", "expected finite numbers")
    seen: set[str] = set()
    for i, phrase in enumerate(head.phrases):
        if not _PHRASE.fullmatch(phrase) or phrase.count(" ") >= head.ngram_max:
            raise bad(
                f"phrases[{i}]",
                f"got {phrase!r}, expected 1 to {head.ngram_max} lower-case ASCII tokens "
                "([0-9a-z_]) joined by single spaces",
            )
        if phrase in seen:
            raise bad(f"phrases[{i}]", f"{phrase!r} appears twice")
        seen.add(phrase)


_FIELD = re.compile(r"at `\$\.([^`]+)`")


def _field_of(message: str) -> str | None:
    found = _FIELD.search(message)
    return found.group(1) if found else None


def _reason_of(message: str) -> str:
    return _FIELD.sub("", message).strip().rstrip("-").strip() or message
