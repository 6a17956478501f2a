"""``faultline run``: send probes to a model, record every answer as it arrives, score, report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faultline.cli._console import err, out, progress_seconds, run_progress, shown
from faultline.cli._options import (
    FiniteFloat,
    body_fields,
    non_empty,
    parse_config,
    scoring_options,
    sendable,
    warn_workers,
)
from faultline.cli._render import render_gates, render_run, with_variants
from faultline.errors import UsageError

if TYPE_CHECKING:
    from faultline.probes.probeset import ProbeSet
    from faultline.runner import RunnerConfig
    from faultline.targets import GenerationParams

#: The largest price of a million tokens: with token counts below 2**63 the estimate stays a
#: finite number (``--price-in 1e308`` overflowed it after every request had been sent).
MAX_PRICE = 1e6


def _target_options(func: Any) -> Any:
    options = [
        click.option(
            "--probes",
            "-p",
            required=True,
            callback=non_empty,
            metavar="P",
            help="Probe set: a YAML/JSONL file, a directory, or a built-in name.",
        ),
        click.option(
            "--transform",
            "transforms",
            multiple=True,
            metavar="NAMES",
            help="Also send attack variants of every probe: comma-separated transform names "
            "(base64, rot13, leetspeak, homoglyph, roleplay, persona, prefix_injection, "
            "payload_split, refusal_suppression, many_shot). Repeatable.",
        ),
        click.option(
            "--target",
            "-t",
            required=True,
            metavar="SPEC",
            help="provider:model: openai:MODEL, anthropic:MODEL, python:module:function, replay:FILE.jsonl.",
        ),
        click.option(
            "--out",
            "-o",
            required=True,
            metavar="DIR",
            type=click.Path(file_okay=False),
            callback=non_empty,
            help="The run directory: journal, responses.jsonl, report.json, report.md, report.html.",
        ),
        click.option(
            "--base-url",
            metavar="URL",
            default=None,
            help="API base URL (default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the public API).",
        ),
        click.option(
            "--api-key-env",
            metavar="NAME",
            default=None,
            help="Environment variable holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).",
        ),
        click.option(
            "--system",
            metavar="TEXT",
            default=None,
            help="A system prompt sent before every probe.",
        ),
        click.option(
            "--temperature",
            type=FiniteFloat(min=0),
            default=None,
            help="Sampling temperature (default: the server's).",
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(min=1),
            default=None,
            help="Longest answer in tokens (default: the server's; 1024 for anthropic).",
        ),
        click.option(
            "--request-seed",
            type=int,
            default=None,
            help="Sent as the request's seed; sample k gets SEED+k.",
        ),
        click.option(
            "--header",
            "headers",
            multiple=True,
            metavar="'NAME: VALUE'",
            help="Extra HTTP header (values are never written anywhere). Repeatable.",
        ),
        click.option(
            "--body",
            "body",
            multiple=True,
            metavar="'NAME=VALUE'",
            help="An extra field of the request body, VALUE as JSON (a bare word is a string): "
            '--body reasoning_effort=high, --body \'thinking={"type": "enabled", '
            '"budget_tokens": 2048}\'. Recorded. Repeatable.',
        ),
        click.option(
            "--timeout",
            type=FiniteFloat(min=0, min_open=True),
            default=120.0,
            show_default=True,
            help="Seconds one request may take.",
        ),
        click.option(
            "--concurrency",
            "-c",
            type=click.IntRange(min=1, max=1024),
            default=8,
            show_default=True,
            help="Requests in flight.",
        ),
        click.option(
            "--rpm",
            type=FiniteFloat(min=0, min_open=True),
            default=None,
            help="Most requests per minute.",
        ),
        click.option(
            "--tpm",
            type=FiniteFloat(min=0, min_open=True),
            default=None,
            help="Most tokens (in + out) per minute.",
        ),
        click.option(
            "--retries",
            type=click.IntRange(min=0),
            default=5,
            show_default=True,
            help="Retries of a request after 429, 5xx, timeouts and dropped connections.",
        ),
        click.option(
            "--samples",
            "-k",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Generations per probe; a probe fails if any sample fails (hit@K).",
        ),
        click.option(
            "--resume",
            is_flag=True,
            help="Continue the run in DIR; recorded cases are not sent again.",
        ),
        click.option(
            "--retry-errors",
            is_flag=True,
            help="With --resume, send the recorded error cases again.",
        ),
        click.option(
            "--cache",
            metavar="DIR",
            type=click.Path(file_okay=False),
            default=None,
            help="Response cache shared across runs (keyed by target, messages, parameters, sample).",
        ),
        click.option(
            "--min-coverage",
            type=FiniteFloat(0, 1),
            default=None,
            help="Exit 3 when fewer than this share of cases were scored.",
        ),
        click.option(
            "--max-error-rate",
            type=FiniteFloat(0, 1),
            default=None,
            help="Exit 3 when more than this share of cases are errors.",
        ),
        click.option(
            "--price-in",
            type=FiniteFloat(min=0, max=MAX_PRICE),
            default=None,
            metavar="PRICE",
            help="Price of a million input tokens (at most 1,000,000), for the cost estimate.",
        ),
        click.option(
            "--price-out",
            type=FiniteFloat(min=0, max=MAX_PRICE),
            default=None,
            metavar="PRICE",
            help="Price of a million output tokens (at most 1,000,000), for the cost estimate.",
        ),
        click.option(
            "--calibration",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            default=None,
            help="A calibration.json from 'faultline calibrate'.",
        ),
        click.option(
            "--junit",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            default=None,
            help="Also write JUnit XML (one test case per probe) for CI systems.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command("run")
@_target_options
@scoring_options
def run_command(**o: Any) -> int:
    """Send a probe set to a model, record the answers in DIR as they arrive, score and report.

    Each answer is committed to DIR/journal.sqlite the moment it arrives; after a crash or
    Ctrl-C, the same command with --resume sends only what is missing. Failed requests
    (after retries) are error cases: never passes, counted in coverage. Exit 0 done, 1 a
    --fail-on gate tripped, 2 bad usage, 3 the target failed (refused the run, or no case
    was answered), DIR could not be written (a full disk), or coverage/error gates tripped,
    130 interrupted (Ctrl-C or SIGTERM).
    --transform NAMES also sends attack variants of every probe (ids ID~NAME); the report
    then compares pass rates per transform (docs/probes.md).
    """
    from faultline.calibration.attach import load_calibration
    from faultline.report.gates import evaluate_gates, parse_gate
    from faultline.runner import Prices, run_probes
    from faultline.targets import TargetOptions

    every = progress_seconds()
    config = parse_config(
        o["pass_threshold"], o["severity_weights"], rules_only=o["rules_only"], learned=o["learned"]
    )
    gates = [parse_gate(g) for g in o["fail_on"]]
    if o["junit"] is not None:  # before any request: a path that cannot be written is bad usage
        from faultline.report.junit import check_junit_path

        check_junit_path(o["junit"], _run_files(o))
    warn_workers(o["workers"])
    params, runner = _request_options(o)
    prices = None if o["price_in"] is None else Prices(o["price_in"], o["price_out"])
    attached = None if o["calibration"] is None else load_calibration(o["calibration"])
    probes = _probe_set(o["probes"], o["transforms"])
    start = time.perf_counter()
    try:
        with run_progress("requests", every) as on_progress:
            run = run_probes(
                probes,
                o["target"],
                o["out"],
                params=params,
                options=TargetOptions(o["base_url"], o["api_key_env"], o["concurrency"]),
                runner=runner,
                samples=o["samples"],
                resume=o["resume"],
                retry_errors=o["retry_errors"],
                cache=o["cache"],
                prices=prices,
                rules=o["rules"],
                config=config,
                seed=o["seed"],
                observability_min_cases=o["observability_min_cases"],
                workers=o["workers"],
                on_progress=on_progress,
                calibration=attached,
            )
    except KeyboardInterrupt:
        err.print(shown(_interrupted(o["out"])))
        return 130
    # Every file is written and every gate decided before a word is printed: the output may
    # go to a reader that leaves early (``| head``), which must change neither.
    junit_path = None
    if o["junit"] is not None:
        from faultline.report.junit import report_junit, write_junit

        junit_path = write_junit(o["junit"], report_junit(run.report))
    results = evaluate_gates(gates, run.report.aggregate_metrics, run.report.run)
    _render_execution(run.execution, run.resumed)
    render_run(run, "run", time.perf_counter() - start)
    if junit_path is not None:
        out.print(shown(f"Wrote JUnit XML to {junit_path}."))
    counts = run.report.aggregate_metrics["counts"]
    tripped = _nothing_answered(counts) | _coverage_gates(
        counts, o["min_coverage"], o["max_error_rate"]
    )
    gate_tripped = render_gates(results)
    return 3 if tripped else 1 if gate_tripped else 0


def _run_files(o: dict[str, Any]) -> list[Path]:
    """The files a run reads or writes: its probe file and every file of its run directory."""
    from faultline.report.model import CASES_FILE, REPORT_FILES
    from faultline.runner import JOURNAL_NAME, LOCK_NAME, RESPONSES_NAME

    names = [JOURNAL_NAME, f"{JOURNAL_NAME}-wal", f"{JOURNAL_NAME}-shm", LOCK_NAME]
    names += [RESPONSES_NAME, *REPORT_FILES, CASES_FILE]
    replayed = o["target"].removeprefix("replay:") if o["target"].startswith("replay:") else ""
    inputs = [p for p in (Path(o["probes"]), Path(replayed.partition("#")[0])) if p.is_file()]
    return [*inputs, *(Path(o["out"]) / name for name in names)]


def _interrupted(out: str) -> str:
    """What an interrupted run leaves in ``out``, and what to do next."""
    from faultline.runner.journal import JOURNAL_NAME, recorded_count

    journal = Path(out) / JOURNAL_NAME
    if not journal.exists():
        return "faultline: interrupted before any request was sent; nothing was recorded."
    n = recorded_count(out)
    if not n:
        return (
            f"faultline: interrupted before any answer was recorded in {journal}: run the same "
            "command again to start the run over (with or without --resume)."
        )
    return (
        f"faultline: interrupted; {n:,} cases are recorded in {journal}. "
        "Run the same command with --resume to send only the rest."
    )


def _probe_set(probes: str, transforms: tuple[str, ...]) -> str | ProbeSet:
    """The probe set to send: as given, or loaded and extended with its attack variants."""
    if not transforms:
        return probes
    from faultline.probes.loader import load_probes

    return with_variants(load_probes(probes), transforms)


def _request_options(o: dict[str, Any]) -> tuple[GenerationParams, RunnerConfig]:
    """How requests are sent, and how hard the runner pushes, from the options."""
    from faultline.runner import RunnerConfig
    from faultline.targets import GenerationParams

    if o["retry_errors"] and not o["resume"]:
        raise UsageError(
            "--retry-errors goes with --resume (it re-sends a recorded run's error cases)"
        )
    if (o["price_in"] is None) != (o["price_out"] is None):
        raise UsageError("give both --price-in and --price-out, or neither")
    params = GenerationParams(
        system=None if o["system"] is None else sendable(o["system"], "--system"),
        temperature=o["temperature"],
        max_tokens=o["max_tokens"],
        seed=o["request_seed"],
        headers=tuple(_header(h) for h in o["headers"]),
        timeout=o["timeout"],
        body=body_fields(o["body"]),
    )
    runner = RunnerConfig(
        concurrency=o["concurrency"],
        rpm=o["rpm"],
        tpm=o["tpm"],
        retries=o["retries"],
        seed=o["seed"],
    )
    return params, runner


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or " " in name.strip():
        raise UsageError(
            "--header: expected 'Name: value', got a value without a name (or without ':')"
        )
    return name.strip(), value.strip()


def _render_execution(execution: dict[str, Any], resumed: int) -> None:
    usage = execution["usage"]
    parts = [
        f"{execution['recorded']:,}/{execution['cases']:,} cases recorded",
        f"{execution['requests']:,} requests",
        f"{execution['retries']:,} retries",
        f"{execution['errors']:,} errors",
    ]
    if execution["cached"]:
        parts.append(f"{execution['cached']:,} from the cache")
    if resumed:
        parts.append(f"{resumed:,} recorded by earlier sittings")
    parts.append(f"tokens {usage['input_tokens']:,} in / {usage['output_tokens']:,} out")
    if execution["cost"] is not None:
        parts.append(f"estimated cost {execution['cost']['estimate']:.4f}")
    out.print("Requests: " + " · ".join(parts) + ".")


def _nothing_answered(counts: dict[str, Any]) -> bool:
    """Whether no case was answered: the target failed, whatever the gates say (exit 3)."""
    if not counts["cases"] or counts["scored"]:
        return False
    err.print(
        f"[red]faultline: no case was answered[/]: all {counts['cases']:,} cases are errors, so "
        "the target failed and there is nothing to score (each case's error is in the report)"
    )
    return True


def _coverage_gates(
    counts: dict[str, Any], min_coverage: float | None, max_error_rate: float | None
) -> bool:
    cases = counts["cases"]
    coverage = counts["scored"] / cases if cases else 0.0
    error_rate = counts["errors"] / cases if cases else 0.0
    tripped = False
    if min_coverage is not None and coverage < min_coverage:
        err.print(
            f"[red]faultline: coverage {coverage:.1%} is below --min-coverage {min_coverage:.1%}[/]: "
            "too many cases have no answer to score, so the pass rate would mislead"
        )
        tripped = True
    if max_error_rate is not None and error_rate > max_error_rate:
        err.print(
            f"[red]faultline: error rate {error_rate:.1%} is above --max-error-rate "
            f"{max_error_rate:.1%}[/]: the target failed too often"
        )
        tripped = True
    return tripped
