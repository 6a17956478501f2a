"""The runner: probes × a target → answers recorded in a run directory, then the report.

:func:`run_probes` is what ``faultline run`` does. It turns each probe into ``samples``
requests, sends the ones the run directory has not recorded yet (:mod:`.execute`), writes
each outcome to the journal as it arrives (:mod:`.journal`), then exports the answers as
``responses.jsonl`` and scores them with the same pipeline as ``faultline score``. The run
directory holds:

=================  =====================================================================
``journal.sqlite``  every case as it arrived, with its request; what ``--resume`` reads
``responses.jsonl`` the answers, in the responses format (re-score or replay them)
``report.json``     the report; ``run.target`` and ``run.execution`` say how it was run
``report.md``       the report for people
``run.lock``        locked while a run uses the directory: one run at a time (:mod:`.lock`)
=================  =====================================================================

No file in it holds an API key or a header value.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from faultline._util.files import atomic_writer
from faultline.errors import TargetError
from faultline.observability.geometry import DEFAULT_MIN_CASES
from faultline.pipeline import ProgressCallback as ScoreProgress
from faultline.pipeline import score_files
from faultline.probes.loader import load_probes
from faultline.probes.model import Probe
from faultline.probes.probeset import ProbeSet
from faultline.report.model import Report
from faultline.runner.cache import ResponseCache
from faultline.runner.execute import ProgressCallback, RunnerConfig, RunProgress, execute
from faultline.runner.journal import (
    JOURNAL_NAME,
    Entry,
    Journal,
    RecordingError,
    probe_set_digest,
)
from faultline.runner.lock import LOCK_NAME, run_lock
from faultline.scoring.case import ScoringConfig
from faultline.scoring.learned import load_learned
from faultline.scoring.rules import RulePack, load_rule_pack
from faultline.targets import GenerationParams, Request, Target, TargetOptions, open_target
from faultline.targets.base import answer_identity

__all__ = [
    "JOURNAL_NAME",
    "LOCK_NAME",
    "RESPONSES_NAME",
    "Prices",
    "ProbeRun",
    "RecordingError",
    "RunProgress",
    "RunnerConfig",
    "build_requests",
    "run_probes",
]

RESPONSES_NAME = "responses.jsonl"


@dataclass(frozen=True)
class Prices:
    """What tokens cost, per million, in the user's currency, for the cost estimate.

    Attributes:
        input_per_mtok: The price of a million input tokens.
        output_per_mtok: The price of a million output tokens.
    """

    input_per_mtok: float
    output_per_mtok: float


@dataclass
class ProbeRun:
    """The outcome of :func:`run_probes`.

    Attributes:
        report: The report.
        sitting: What this sitting did: cases recorded, errors, retries, cache hits.
        execution: The report's ``run.execution`` (the whole run, over every sitting).
        written: The files written.
        resumed: How many cases earlier sittings had recorded.
        unanswered: Probes without a case (always empty: every probe is asked).
    """

    report: Report
    sitting: RunProgress
    execution: dict[str, Any]
    written: list[Path] = field(default_factory=list)
    resumed: int = 0
    unanswered: list[str] = field(default_factory=list)


def build_requests(
    probe_set: ProbeSet, params: GenerationParams, samples: int = 1
) -> list[Request]:
    """The requests of a run: every probe, ``samples`` times, in probe-set order."""
    return [
        Request(probe.id, k, _messages(probe, params.system), params)
        for probe in probe_set
        for k in range(samples)
    ]


def _scoring_inputs(rules: str | Path | RulePack, config: ScoringConfig | None) -> RulePack:
    """The rule pack, loaded, and the learned model, checked (and cached for scoring).

    A bad model stops the run before any request is sent, not after every answer is in.
    """
    pack = rules if isinstance(rules, RulePack) else load_rule_pack(rules)
    learned = (config or ScoringConfig()).learned
    if learned is not None:
        load_learned(learned)
    return pack


def run_probes(
    probes: str | Path | ProbeSet,
    target: str | Target,
    out: str | Path,
    *,
    params: GenerationParams | None = None,
    options: TargetOptions | None = None,
    runner: RunnerConfig | None = None,
    samples: int = 1,
    resume: bool = False,
    retry_errors: bool = False,
    cache: str | Path | None = None,
    prices: Prices | None = None,
    rules: str | Path | RulePack = "default",
    config: ScoringConfig | None = None,
    seed: int = 0,
    observability_min_cases: int = DEFAULT_MIN_CASES,
    workers: int | None = 1,
    on_progress: ProgressCallback | None = None,
    on_scoring: ScoreProgress | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> ProbeRun:
    """Send a probe set to a target, record every answer in ``out``, score and report.

    Args:
        probes: A probe-set file, directory or built-in name, or a loaded set.
        target: A ``provider:model`` spec, or an opened target.
        out: The run directory (created if missing).
        params: How requests are sent (system prompt, temperature, ...).
        options: Endpoint, key variable and concurrency, for a spec.
        runner: Concurrency, rate limits and retries.
        samples: Generations per probe; a probe fails if any of its samples fails.
        resume: Continue the run recorded in ``out``; recorded cases are not sent again.
        retry_errors: With ``resume``, send the recorded error cases again.
        cache: A response-cache directory shared across runs.
        prices: Token prices, for ``run.execution.cost``.
        rules: The rule pack.
        config: The scoring configuration.
        seed: Seeds the failure geometry and the retry jitter.
        observability_min_cases: The fewest scored cases for which the geometry is built.
        workers: Worker processes for scoring the answers (see :func:`score_files`).
        on_progress: Called after each recorded case.
        on_scoring: Called as the answers are scored.
        calibration: Each rule's measured precision, for ``run.calibration``.

    Raises:
        UsageError: ``out`` holds another run, or a run and ``resume`` is false, or another
            process is running in ``out`` right now (it holds ``run.lock``).
        TargetError: The target rejected the run (a bad key, an unknown model).
        RecordingError: A file of ``out`` could not be written (a full disk): what was
            recorded is kept, and ``resume`` continues.
        InputError: A probe set, rule pack or learned model is malformed, the journal in
            ``out`` is damaged or cannot be written, or ``cache`` holds a file that is not a
            response cache (refused before anything is made in ``out``).
        KeyboardInterrupt: Interrupted; what was recorded stays for ``--resume``.
    """
    probe_set = probes if isinstance(probes, ProbeSet) else load_probes(probes)
    pack = _scoring_inputs(rules, config)
    params = params or GenerationParams()
    runner = runner or RunnerConfig(seed=seed)
    if runner.seed is None:
        runner = dataclasses.replace(runner, seed=seed)
    opened = (
        target
        if not isinstance(target, str)
        else open_target(target, params, _with(options, runner))
    )
    out = Path(out)
    described = opened.describe()
    fingerprint = {
        "probe_set": probe_set_digest(probe_set),  # the same probes in any order
        "target": _recorded_target(opened, described),
        "params": {k: v for k, v in params.record().items() if k != "timeout"},
        "samples": samples,
    }
    # The cache is opened (and checked) before anything is made in ``out``: a file that is
    # not a cache stops the run with nothing to clean up. It is closed however the run ends.
    store = None if cache is None or opened.provider == "replay" else ResponseCache(cache)
    with (
        contextlib.nullcontext() if store is None else contextlib.closing(store),
        run_lock(out),  # one run in the directory at a time, until its reports are written
    ):
        journal = Journal.open(out, fingerprint, resume=resume, probes=probe_set)
        try:
            requests = build_requests(probe_set, params, samples)
            recorded = journal.recorded()
            pending = [
                r
                for r in requests
                if (key := (r.probe_id, r.sample)) not in recorded
                or (retry_errors and recorded[key])
            ]
            journal.start(
                None if store is None else partial(store.put_answers, answer_identity(opened))
            )
            try:
                sitting = asyncio.run(
                    _send(
                        opened,
                        pending,
                        journal,
                        runner=runner,
                        cache=store,
                        on_progress=on_progress,
                    )
                )
            except TargetError as exc:  # the target refused the run: say what to do next
                journal.stop()
                advice = _after_refusal(len(journal.recorded()), out)
                raise TargetError(f"{exc}. {advice}", target=exc.target) from None
            finally:
                try:
                    journal.stop()
                finally:
                    if store is not None:
                        store.close()
            entries = {(e.probe_id, e.sample): e for e in journal.entries()}
            sittings = journal.sittings
        finally:
            journal.close()
        chosen = _all_recorded(requests, entries, out)
        responses = out / RESPONSES_NAME
        try:
            _export(chosen, responses, described.get("model"))
        except OSError as exc:
            raise _unwritten(responses, exc, len(chosen), out) from None
        execution = _execution(
            chosen,
            cases=len(requests),
            samples=samples,
            sittings=sittings,
            params=params,
            prices=prices,
        )
        try:
            scored = score_files(
                probe_set,
                responses,
                out,
                rules=pack,
                config=config,
                seed=seed,
                observability_min_cases=observability_min_cases,
                workers=workers,
                on_progress=on_scoring,
                calibration=calibration,
                target=described,
                execution=execution,
            )
        except OSError as exc:  # every answer is recorded: only the reports are missing
            where = _staged_name(exc.filename) or f"the reports in {out} (report.json and views)"
            raise _unwritten(where, exc, len(chosen), out) from None
        return ProbeRun(
            report=scored.report,
            sitting=sitting,
            execution=execution,
            written=[responses, *scored.written],
            resumed=len(requests) - len(pending),
        )


def _recorded_target(target: Target, described: dict[str, Any]) -> dict[str, Any]:
    """The target as the journal's fingerprint records it, for ``--resume`` to compare.

    Whether a proxy was used is left out: it is how the target was reached, and may change
    between sittings. An API target adds ``private``: the digest of its base URL's query and
    user info and its ``--header`` names and values (``None`` without them), so that a
    resume against another deployment is refused, while the values are never written.
    """
    recorded = {k: v for k, v in described.items() if k != "proxy"}  # how, not whom
    if not hasattr(target, "private_digest"):
        return recorded
    return {**recorded, "private": target.private_digest}


def _all_recorded(
    requests: Sequence[Request], entries: Mapping[tuple[str, int], Entry], out: Path
) -> list[Entry]:
    """Every case of the run, in request order, each recorded as an answer or an error.

    An invariant: every request ends up in the journal. A case lost on the way (a worker that
    stopped early) would otherwise leave a report that leaves it out and still reads full
    coverage; the run fails instead, before any report is written.

    Raises:
        RecordingError: A case is not recorded (exit code 3).
    """
    missing = [
        f"{r.probe_id}#{r.sample}" for r in requests if (r.probe_id, r.sample) not in entries
    ]
    if not missing:
        return [entries[(r.probe_id, r.sample)] for r in requests]
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5:,} more" if len(missing) > 5 else "")
    raise RecordingError(
        f"the run planned {len(requests):,} cases but {len(missing):,} were never recorded "
        f"({shown}): a worker stopped before recording them (a target that cancels the "
        "task that calls it, or a bug in faultline: please report it). No report was written, "
        f"as it would leave them out; the {len(requests) - len(missing):,} cases recorded in "
        f"{out / JOURNAL_NAME} are kept, and the same command with --resume sends the missing ones"
    )


def _unwritten(where: Path | str, exc: OSError, recorded: int, out: Path) -> RecordingError:
    """The error for a run whose answers are all recorded but whose files could not be written."""
    reason = (exc.strerror or str(exc)).lower()
    return RecordingError(
        f"{where} could not be written ({reason}); all {recorded:,} cases are recorded in "
        f"{out / JOURNAL_NAME}: make room (or fix the cause) and run the same command with "
        "--resume to write the reports (nothing is sent again)"
    )


def _staged_name(filename: object) -> Path | None:
    """The file a failed write was for: ``.report.json.x1y2.tmp`` was staged for ``report.json``."""
    if not isinstance(filename, str | Path):
        return None
    path = Path(filename)
    staged = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", path.name)
    return path if staged is None else path.with_name(staged.group(1))


def _after_refusal(recorded: int, out: Path) -> str:
    """What to do after the target refused the run, given how many cases were recorded."""
    if not recorded:
        return (
            "Nothing was recorded: fix the cause (the key, the model name, --base-url) and run "
            "the command again; --resume is not needed, and a corrected target is accepted"
        )
    return (
        f"The {recorded:,} cases recorded in {out / JOURNAL_NAME} are kept: fix the cause and "
        "run the same command with --resume (a different model or --base-url is another run: "
        "give it another --out)"
    )


def _with(options: TargetOptions | None, runner: RunnerConfig) -> TargetOptions:
    options = options or TargetOptions()
    return TargetOptions(options.base_url, options.api_key_env, runner.concurrency)


async def _send(
    target: Target,
    pending: Sequence[Request],
    journal: Journal,
    *,
    runner: RunnerConfig,
    cache: ResponseCache | None,
    on_progress: ProgressCallback | None,
) -> RunProgress:
    try:
        return await execute(
            target, pending, journal, config=runner, cache=cache, on_progress=on_progress
        )
    finally:
        await target.aclose()


def _messages(probe: Probe, system: str | None) -> tuple[dict[str, str], ...]:
    head = () if system is None else ({"role": "system", "content": system},)
    if isinstance(probe.input, str):
        return (*head, {"role": "user", "content": probe.input})
    return (*head, *({"role": m.role, "content": m.content} for m in probe.input))


class _Line(msgspec.Struct, omit_defaults=True):
    probe_id: str
    sample: int
    model: str | None = None
    response: str | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    error: dict[str, Any] | None = None
    reasoning: str | None = None


def _export(entries: Sequence[Entry], path: Path, model: str | None) -> None:
    """Write the answers as a responses file, in request order, atomically.

    Every case carries the model the run asked for (``model``), so that answers and errors
    group together; the name the server gave its model stays in the journal.
    """
    encode = msgspec.json.Encoder().encode
    with atomic_writer(path) as handle:
        for e in entries:
            usage = {
                k: v
                for k, v in (("input_tokens", e.input_tokens), ("output_tokens", e.output_tokens))
                if v is not None
            }
            line = _Line(
                e.probe_id,
                e.sample,
                model or e.model,
                e.response,
                e.finish_reason,
                usage or None,
                None if e.error is None else dict(e.error),
                e.reasoning,
            )
            handle.write(encode(line) + b"\n")


def _execution(
    entries: Sequence[Entry],
    *,
    cases: int,
    samples: int,
    sittings: int,
    params: GenerationParams,
    prices: Prices | None,
) -> dict[str, Any]:
    """The report's ``run.execution``: how the answers were collected, over every sitting.

    Tokens and cost count what was sent; answers taken from the cache cost nothing this run,
    and their tokens are counted apart.
    """
    sent = [e for e in entries if not e.cached]
    tokens_in = sum(e.input_tokens or 0 for e in sent)
    tokens_out = sum(e.output_tokens or 0 for e in sent)
    attempts = sum(e.attempts for e in entries)
    cost = None
    if prices is not None:
        cost = {
            "input_per_mtok": prices.input_per_mtok,
            "output_per_mtok": prices.output_per_mtok,
            "estimate": (tokens_in * prices.input_per_mtok + tokens_out * prices.output_per_mtok)
            / 1e6,
        }
    return {
        "samples": samples,
        "cases": cases,
        "recorded": len(entries),
        "errors": sum(e.error is not None for e in entries),
        "cached": sum(e.cached for e in entries),
        "requests": attempts,
        "retries": sum(max(0, e.attempts - 1) for e in entries),
        "sittings": sittings,
        "params": params.record(),
        "usage": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cases_without_usage": sum(e.error is None and e.input_tokens is None for e in sent),
            "cached_input_tokens": sum(e.input_tokens or 0 for e in entries if e.cached),
            "cached_output_tokens": sum(e.output_tokens or 0 for e in entries if e.cached),
        },
        "cost": cost,
    }
