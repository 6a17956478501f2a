"""What scoring costs with RE2 alone: the floor under any faster scoring core.

Times, in one process on the first N answers of the benchmark corpus (best of 5 passes,
microseconds a response), each stage of ``score_piece`` that a compiled core would still run
(RE2's own matching, which is C++ already) beside the whole of it::

    python bench/floor.py --n 20000

- the rules' ``re2.Set`` passes alone (``Matcher._sets``: which patterns match where);
- ``Matcher.match_batch``: those passes, each hit pattern's span, and the hits built in Python;
- each learned head's phrase set alone, over its window;
- ``score_piece`` whole: decoding, scoring, the per-piece summaries and the Arrow table.

Half a stage's microseconds a response are its seconds of wall time at 1M responses on 2
workers: the RE2 sets alone give the time that no scoring core keeping RE2 can beat.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus as corpus_mod  # noqa: E402

from faultline.pipeline.batch import BatchContext, Layout, init, score_piece  # noqa: E402
from faultline.probes.loader import load_probes  # noqa: E402
from faultline.responses.sources import Piece  # noqa: E402
from faultline.scoring import learned as learned_mod  # noqa: E402
from faultline.scoring.case import ScoringConfig  # noqa: E402
from faultline.scoring.rules import load_rule_pack  # noqa: E402
from faultline.scoring.scorer import Scorer  # noqa: E402

PIECE = 2_000  # records a piece, about what the pipeline cuts at this corpus's line length


def _best(run: Callable[[], object], n: int, repeats: int = 5) -> float:
    """The fastest of ``repeats`` runs, in microseconds per response."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="answers to time (default 20,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    corpus = corpus_mod.ensure_corpus(max(args.n, 10_000), args.seed)
    with corpus.responses.open("rb") as handle:
        lines = list(itertools.islice(handle, args.n))
    n = len(lines)
    records = [msgspec.json.decode(line) for line in lines]
    texts = [r.get("response") or "" for r in records]
    pack, config = load_rule_pack(), ScoringConfig()
    scorer = Scorer(pack, config)
    matcher, learned = scorer.matcher, scorer.learned
    datas = [t.encode("utf-8", "surrogatepass") for t in texts]

    def sets() -> None:
        for _, run_set in matcher._sets:
            for data in datas:
                run_set(data)

    rows = [
        ("rules: the RE2 sets alone", _best(sets, n)),
        ("rules: match_batch (sets, spans, hits)", _best(lambda: matcher.match_batch(texts), n)),
    ]
    if learned is not None:
        for name, head in (("refusal", learned.refusal), ("harm", learned.harm)):
            windows = [learned_mod._encode(t[: head.window]) for t in texts]
            match = head._match
            if match is None:
                continue

            def phrases(match: Callable[[bytes], object] = match, w: list[bytes] = windows) -> None:
                for data in w:
                    match(data)

            label = f"learned {name} head: its RE2 set alone (first {head.window} characters)"
            rows.append((label, _best(phrases, n)))
    probes = load_probes(corpus.probes)
    context = BatchContext(probes.by_id, probes.name, pack, config)
    init(context)
    models = sorted({r.get("model") or "" for r in records})
    layout = Layout({m: i for i, m in enumerate(models)}, qualify=len(models) > 1, inline=False)
    pieces = [
        Piece(corpus.responses, 1 + i, b"".join(lines[i : i + PIECE]), None, 1)
        for i in range(0, n, PIECE)
    ]
    score_piece(0, pieces[0], layout)  # warm: imports and compiled automata

    def whole() -> None:
        for i, piece in enumerate(pieces):
            score_piece(i, piece, layout)

    rows.append(("score_piece, whole", _best(whole, n, repeats=3)))
    print(f"{n:,} corpus answers, {sum(map(len, texts)) / n:.0f} characters on average")
    print("| stage | µs a response |\n| --- | ---: |")
    for name, micros in rows:
        print(f"| {name} | {micros:.1f} |")


if __name__ == "__main__":
    main()
