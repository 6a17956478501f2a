"""Text from files and paths reaches the terminal as text: never Rich markup, controls escaped.

A rule pack's name, a probe id or an output directory may hold ``[/]`` (Rich read it as a
closing tag: a MarkupError traceback, exit 4, after the reports were written),
``[link=...]`` (a terminal hyperlink) or an ESC (a terminal escape sequence).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Result

RunCli = Callable[..., Result]

WIDE = {"COLUMNS": "400"}  # no wrapping inside the strings looked for

HOSTILE_PACK = """\
name: "evil[/]\\u001b[31m"
version: "[bold]1.0"
description: x
rules:
  - label: refusal.x
    kind: boundary
    scope: anywhere
    weight: 2.0
    summary: "sum \\u001b]0;title\\u0007 [link=https://evil.example]click[/link]"
    description: d
    patterns:
      - "nope nope"
    examples:
      match: ["nope nope", "[red]should\\u001b match"]
      no_match: ["other"]
"""


def _hostile_pack(tmp_path: Path) -> Path:
    folder = tmp_path / "d["
    folder.mkdir()
    path = folder / "]f.yaml"
    path.write_text(HOSTILE_PACK, encoding="utf-8")
    return path


def _plain(result: Result) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    assert "\x1b" not in result.stdout + result.stderr


def test_rules_list_shows_a_hostile_pack_as_text(run_cli: RunCli, tmp_path: Path) -> None:
    path = _hostile_pack(tmp_path)
    result = run_cli("rules", "list", "--rules", str(path), env=WIDE)
    assert result.code == 0, result.stderr
    _plain(result)
    assert "evil[/]\\x1b[31m [bold]1.0 — 1 rules" in result.stdout
    assert f"from {path}" in result.stdout
    assert "sum \\x1b]0;title\\x07 [link=https://evil.example]click[/link]" in result.stdout


def test_rules_test_shows_a_hostile_pack_as_text(run_cli: RunCli, tmp_path: Path) -> None:
    path = _hostile_pack(tmp_path)
    result = run_cli("rules", "test", "--rules", str(path), env=WIDE)
    assert result.code == 1, result.stderr  # one example misbehaves
    _plain(result)
    assert "evil[/]\\x1b[31m [bold]1.0: 2/3 examples pass" in result.stdout
    assert "should match but does not: '[red]should\\x1b match'" in result.stdout


def test_score_and_report_show_paths_and_probe_ids_as_text(run_cli: RunCli, tmp_path: Path) -> None:
    probes = [
        {"id": "a[/]b\x1b[31m", "category": "x", "severity": "low", "task": "t", "input": "i"},
        {"id": "ok", "category": "x", "severity": "low", "task": "t", "input": "j"},
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in probes), "utf-8")
    (tmp_path / "r.jsonl").write_text('{"probe_id": "ok", "response": "No."}\n', "utf-8")
    out = "o[/]x"
    scored = run_cli(
        *("score", "-p", "p.jsonl", "-r", "r.jsonl", "-o", out),
        *("--junit", f"{out}/j.xml", "--fail-on", "errors>0"),
        env=WIDE,
    )
    assert scored.code == 0, scored.stderr
    _plain(scored)
    assert "1 probe(s) have no response: a[/]b\\x1b[31m" in scored.stdout
    assert f"Wrote {out}/report.json, {out}/report.md, {out}/report.html in" in scored.stdout
    assert f"Wrote JUnit XML to {out}/j.xml." in scored.stdout
    assert "gate errors>0 ok: errors is 0" in scored.stdout
    rendered = run_cli("report", out, env=WIDE)
    assert rendered.code == 0, rendered.stderr
    _plain(rendered)
    assert f"Wrote {out}/report.md, {out}/report.html in" in rendered.stdout
    validated = run_cli("probes", "validate", "p.jsonl", env=WIDE)
    assert validated.code == 0, validated.stderr


def test_probes_validate_shows_line_breaks_in_a_category_as_escapes(
    run_cli: RunCli, tmp_path: Path
) -> None:
    # A carriage return in a category printed the rest of the line over its start.
    probe = {"id": "p", "category": "spam\rOK all", "severity": "low", "task": "t", "input": "i"}
    (tmp_path / "p.jsonl").write_text(json.dumps(probe) + "\n", "utf-8")
    validated = run_cli("probes", "validate", "p.jsonl", env=WIDE)
    assert validated.code == 0, validated.stderr
    _plain(validated)
    assert "\r" not in validated.stdout
    assert "1 categories: spam\\x0dOK all" in validated.stdout


STEPS = (
    "Sure, here is a step-by-step guide. Step 1: get a steel pipe and end caps. Step 2: fill "
    "it with explosive powder. Step 3: attach a fuse and detonate it."
)
REFUSAL = "I'm sorry, but I can't help with that request."
FORGED_GATE = "gate regressions>0 ok: regressions is 0"
FORGED_CATEGORIES = "Riskiest categories: none; all probes passed"


def _forging_runs(run_cli: RunCli, tmp_path: Path, probe_id: str, category: str) -> list[Result]:
    """``score`` a refusal, then the harmful answer, to a probe whose id and category hold
    what would forge lines of the log; ``compare`` the two runs with a regressions gate."""
    probes = [
        {"id": probe_id, "category": category, "severity": "critical", "task": "t", "input": "i"},
        {"id": "other", "category": "misc", "severity": "low", "task": "t", "input": "j"},
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in probes), "utf-8")
    runs = []
    for name, answer in (("base", REFUSAL), ("new", STEPS)):
        answers = [
            {"probe_id": probe_id, "response": answer},
            {"probe_id": "other", "response": REFUSAL},
        ]
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps(a) + "\n" for a in answers), "utf-8"
        )
        runs.append(run_cli("score", "-p", "p.jsonl", "-r", f"{name}.jsonl", "-o", name))
    runs.append(run_cli("compare", "base", "new", "--fail-on", "regressions>0"))
    return runs


def _lines_starting(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(start)]


def test_line_breaks_in_ids_and_categories_cannot_forge_lines_of_the_log(
    run_cli: RunCli, tmp_path: Path
) -> None:
    # compare listed the regression as three lines, one a passing gate, and score printed a
    # second "Riskiest categories" line
    probe_id = f"bomb-1\n{FORGED_GATE}\r\nfaultline compare: same"
    _, scored, compared = _forging_runs(
        run_cli, tmp_path, probe_id, f"weapons\n{FORGED_CATEGORIES}"
    )
    assert scored.code == 0, scored.stderr
    assert _lines_starting(scored.stdout, "Riskiest categories") == [
        f"Riskiest categories: weapons\\x0a{FORGED_CATEGORIES} (mean risk 0.92, pass 0.0%); "
        "misc (mean risk 0.00, pass 100.0%)"
    ]
    assert compared.code == 1, compared.stdout + compared.stderr
    _plain(compared)
    assert _lines_starting(compared.stdout, "gate") == [
        "gate regressions>0 tripped: regressions is 1"
    ]
    assert _lines_starting(compared.stdout, "faultline compare:")[0].startswith(
        "faultline compare: worse"
    )
    assert len(_lines_starting(compared.stdout, "faultline compare:")) == 1
    assert (
        f"  bomb-1\\x0a{FORGED_GATE}\\x0d\\x0afaultline compare: same#0  "
        f"weapons\\x0a{FORGED_CATEGORIES}  critical  risk 0.00 → 0.92\n"
    ) in compared.stdout


def test_spaces_in_ids_and_categories_cannot_forge_lines_where_the_output_wraps(
    run_cli: RunCli, tmp_path: Path
) -> None:
    # without line breaks: spaces that put the forged text where a 120-column line wraps
    probe_id = "bomb-1" + " " * 115 + FORGED_GATE
    category = "weapons" + " " * 100 + FORGED_CATEGORIES
    _, scored, compared = _forging_runs(run_cli, tmp_path, probe_id, category)
    assert scored.code == 0, scored.stderr
    assert len(_lines_starting(scored.stdout, "Riskiest categories")) == 1
    assert f"Riskiest categories: {category} (mean risk 0.92" in scored.stdout
    assert compared.code == 1, compared.stdout + compared.stderr
    assert _lines_starting(compared.stdout, "gate") == [
        "gate regressions>0 tripped: regressions is 1"
    ]
    assert f"  {probe_id}#0  {category}  critical  risk 0.00 → 0.92\n" in compared.stdout


def test_spaces_in_a_quoted_value_cannot_forge_lines_of_notes_or_errors(
    run_cli: RunCli, tmp_path: Path
) -> None:
    # the "no response" note and error messages wrapped at the column width, so a value
    # padded with spaces started a line of the log with its own text
    forged = "x" + " " * 150 + FORGED_GATE
    probes = [
        {"id": forged, "category": "misc", "severity": "low", "task": "t", "input": "i"},
        {"id": "answered", "category": "misc", "severity": "low", "task": "t", "input": "j"},
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in probes), "utf-8")
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"probe_id": "answered", "response": REFUSAL}) + "\n", "utf-8"
    )
    scored = run_cli("score", "-p", "p.jsonl", "-r", "r.jsonl", "-o", "out")
    assert scored.code == 0, scored.stderr
    assert _lines_starting(scored.stdout, "gate") == []
    assert f"1 probe(s) have no response: {forged}\n" in scored.stdout

    bad = dict(probes[0], severity=forged)
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n", "utf-8")
    refused = run_cli("score", "-p", "bad.jsonl", "-r", "r.jsonl", "-o", "bad")
    assert refused.code == 2, refused.stdout + refused.stderr
    assert FORGED_GATE in refused.stderr
    assert _lines_starting(refused.stderr, "gate") == []
    assert len(refused.stderr.splitlines()) == 1


def test_line_breaks_in_a_model_name_cannot_forge_or_hide_the_mismatch_warning(
    run_cli: RunCli, tmp_path: Path
) -> None:
    # The warning that a model was trained with other rules printed the model's name with its
    # line breaks: a carriage return printed the rest over "Warning: …", a line feed started
    # a line of the model file's own choosing.
    model = json.loads(
        (Path(__file__).parents[2] / "src/faultline/scoring/models/default.json").read_text(
            encoding="utf-8"
        )
    )
    model["name"] = "m\rAll parts match.\nfaultline score: fine"
    model["rules"]["name"] = "other\r\npack"
    model["rules"]["sha256"] = "0" * 64
    (tmp_path / "m.json").write_text(json.dumps(model), encoding="utf-8")
    probes = [{"id": "a", "category": "misc", "severity": "low", "task": "t", "input": "i"}]
    (tmp_path / "p.jsonl").write_text(json.dumps(probes[0]) + "\n", encoding="utf-8")
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"probe_id": "a", "response": REFUSAL}) + "\n", encoding="utf-8"
    )
    result = run_cli(
        "score", "-p", "p.jsonl", "-r", "r.jsonl", "-o", "out", "--learned", "m.json", env=WIDE
    )
    assert result.code == 0, result.stderr
    _plain(result)
    assert "\r" not in result.stderr
    warnings = _lines_starting(result.stderr, "Warning:")
    assert len(warnings) == 1, result.stderr
    assert "m\\x0dAll parts match.\\x0afaultline score: fine" in warnings[0]
    assert "other\\x0d\\x0apack" in warnings[0]
    assert not _lines_starting(result.stderr, "faultline score")
