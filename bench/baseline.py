"""The baseline: the same rules as a naive loop of Python ``re.search``, against faultline.

On the first ``--sample`` records of a responses file, in one process, this times

* ``naive``: every expanded pattern of the rule pack compiled with Python's ``re`` exactly
  as faultline compiles it for RE2 (``(?i)`` unless case-sensitive, the sentence-start
  prefix for ``sentence`` rules, ``opening`` rules on the first ``opening_chars``
  characters only), then ``regex.search(text)`` for every pattern of every response,
  keeping each rule's first span;
* ``matcher``: faultline's matching stage, ``Matcher(pack).match(text)``, cold (a new
  matcher: RE2 builds its DFA during the pass) and warm (the same matcher, a second pass),
  and, where the matcher has it, ``match_batch`` over batches of 4,096 texts;
* ``scorer``: the full scorer, ``Scorer(pack).score_batch(...)`` (matching, the risk model,
  explanations and evidence: everything but I/O, metrics and the report), cold and warm;

and checks that the naive loop and the matcher find the same rules. Prints JSON::

    python bench/baseline.py --probes P --responses R --sample 20000
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from faultline.probes.loader import load_probes
from faultline.responses.loader import iter_response_batches
from faultline.responses.model import Response
from faultline.scoring import Matcher, RulePack, Scorer, load_rule_pack
from faultline.scoring.matcher import SENTENCE_START

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import peak_rss_self

NaivePattern = tuple[int, bool, re.Pattern[str]]


def read_sample(path: Path, n: int) -> list[Response]:
    """The first ``n`` records of a responses file."""
    batches = (b.responses for b in iter_response_batches(path))
    return list(itertools.islice(itertools.chain.from_iterable(batches), n))


def compile_naive(pack: RulePack) -> tuple[list[NaivePattern], list[str]]:
    """Every pattern of ``pack`` compiled by Python's ``re``, and the ones it rejects."""
    compiled: list[NaivePattern] = []
    skipped: list[str] = []
    for index, rule in enumerate(pack.rules):
        flags = "" if rule.case_sensitive else "(?i)"
        prefix = SENTENCE_START if rule.scope == "sentence" else ""
        for pattern in rule.patterns:
            try:
                regex = re.compile(f"{flags}{prefix}({pattern})")
            except re.error as exc:
                skipped.append(f"{rule.label}: {exc}")
                continue
            compiled.append((index, rule.scope == "opening", regex))
    return compiled, skipped


def naive_match(
    patterns: list[NaivePattern], text: str, opening_chars: int
) -> dict[int, tuple[int, int]]:
    """Each matching rule's first span, by searching every pattern in turn."""
    head = text[:opening_chars]
    found: dict[int, tuple[int, int]] = {}
    for index, opening, regex in patterns:
        match = regex.search(head if opening else text)
        if match is not None:
            span = match.span(1)
            if index not in found or span < found[index]:
                found[index] = span
    return found


def _timed(label: str, func: Any, n: int) -> dict[str, Any]:
    start = time.perf_counter()
    out = func()
    seconds = time.perf_counter() - start
    print(f"  {label}: {n / seconds:,.0f} responses/s", file=sys.stderr)
    return {"seconds": seconds, "responses_per_s": n / seconds, "result": out}


def _agreement(naive: list[dict[int, tuple[int, int]]], hits: list[Any]) -> tuple[int, int]:
    """How many responses get the same rules, and the same rules with the same spans."""
    rules = spans = 0
    for found, matched in zip(naive, hits, strict=True):
        rules += set(found) == {h.rule for h in matched}
        spans += found == {h.rule: (h.start, h.end) for h in matched}
    return rules, spans


def _batch(pack: RulePack, texts: list[str], size: int = 4096) -> dict[str, Any]:
    """``Matcher.match_batch`` over the sample in batches of ``size``, cold and warm."""
    matcher = Matcher(pack)

    def run() -> None:
        for start in range(0, len(texts), size):
            matcher.match_batch(texts[start : start + size])

    cold = _timed("faultline matcher, batches, cold", run, len(texts))
    warm = _timed("faultline matcher, batches, warm", run, len(texts))
    for part in (cold, warm):
        del part["result"]
    return {"matcher_batch_cold": cold, "matcher_batch": warm, "matcher_batch_size": size}


def measure(probes: Path, responses: Path, sample: int) -> dict[str, Any]:
    """Time the naive loop, the matcher and the scorer on the same sample.

    RE2 builds its DFA lazily, so the matcher and the scorer are each timed twice, new
    (``cold``: the first pass builds the DFA states) and then again (``warm``: the steady
    state of a long run). The naive loop has no such state; it runs once.
    """
    probe_set = load_probes(probes)
    records = read_sample(responses, sample)
    texts = [r.response or "" for r in records]
    pack = load_rule_pack("default")
    opening = pack.scoring.opening_chars
    patterns, skipped = compile_naive(pack)
    n = len(texts)
    naive = _timed("naive re loop", lambda: [naive_match(patterns, t, opening) for t in texts], n)
    matcher = Matcher(pack)
    cold = _timed("faultline matcher, cold", lambda: [matcher.match(t) for t in texts], n)
    match = _timed("faultline matcher, warm", lambda: [matcher.match(t) for t in texts], n)
    batch = _batch(pack, texts) if hasattr(Matcher, "match_batch") else {}
    scorer = Scorer(pack)
    score = lambda: scorer.score_batch(probe_set.by_id, records)  # noqa: E731
    scorer_cold = _timed("faultline scorer, cold", score, n)
    scored = _timed("faultline scorer, warm", score, n)
    agree, same_spans = _agreement(naive["result"], match["result"])
    for part in (naive, cold, match, scorer_cold, scored):
        del part["result"]
    return {
        "sample": n,
        "sample_chars": sum(map(len, texts)),
        "patterns": sum(len(r.patterns) for r in pack.rules),
        "rules": len(pack.rules),
        "naive_compiled": len(patterns),
        "naive_skipped": skipped,
        "naive": naive,
        "matcher_cold": cold,
        "matcher": match,
        **batch,
        "scorer_cold": scorer_cold,
        "scorer": scored,
        "same_rules": agree,
        "same_rules_and_spans": same_spans,
        "peak_rss_bytes": peak_rss_self(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="naive re loop vs faultline, one process")
    parser.add_argument("--probes", type=Path, required=True)
    parser.add_argument("--responses", type=Path, required=True)
    parser.add_argument("--sample", type=int, default=20_000)
    args = parser.parse_args()
    print(json.dumps(measure(args.probes, args.responses, args.sample)))


if __name__ == "__main__":
    main()
