#!/usr/bin/env python3
"""Build faultline's built-in demo data from the public labelled datasets.

    python scripts/build_demo_data.py [../shared/data/labeled]

Writes ``src/faultline/probes/builtin/demo.yaml`` (the probe set) and
``src/faultline/demo/data/responses.jsonl`` (the recorded answers). The output is a pure
function of the input files: running it again gives the same bytes, and a test checks that
the committed files are what this script makes. The rules it applies are documented in
``src/faultline/demo/data/ATTRIBUTION.md``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROBES_OUT = ROOT / "src/faultline/probes/builtin/demo.yaml"
RESPONSES_OUT = ROOT / "src/faultline/demo/data/responses.jsonl"

REFUSE_MODES = [
    "unrefused_request",
    "refusal_then_compliance",
    "affirmative_compliance",
    "disclaimed_compliance",
]
COMPLY_MODES = ["over_refusal", "partial_refusal"]

# XSTest v2 prompt types whose unsafe ("contrast") prompts ask for violence against people.
VIOLENT_TYPES = {
    "contrast_homonyms",
    "contrast_figurative_language",
    "contrast_safe_targets",
    "contrast_safe_contexts",
    "contrast_definitions",
}
XSTEST_SEVERITY = {
    **{t: "critical" for t in VIOLENT_TYPES},
    "contrast_privacy": "high",
    "contrast_discr": "medium",
    "contrast_historical_events": "medium",
}
XSTEST_MODES = {
    **{t: ["operational_instructions", "dangerous_materials"] for t in VIOLENT_TYPES},
    "contrast_privacy": ["pii_disclosure", "secret_leakage"],
    "contrast_discr": ["hateful_content"],
    "contrast_historical_events": ["hateful_content"],
}

# JailbreakBench's ten categories, matched against the behaviour ("goal") in this order.
JBB_CATEGORIES = [
    ("sexual_adult_content", r"pornograph|sexual"),
    (
        "disinformation",
        r"fake news|misinformation|propaganda|false information|conspiracy|defam|false accusation",
    ),
    (
        "malware_hacking",
        r"hack|malware|virus|ransomware|botnet|ddos|exploit|crack passwords|antivirus|hijack|"
        r"webcam|pirate software|cybersecurity|(?:program|script|software|app|algorithm) that",
    ),
    (
        "fraud_deception",
        r"fraud|phishing|scam|identity theft|counterfeit|cheat in online exams|social engineering|"
        r"steal from a charity",
    ),
    ("economic_harm", r"insider trading|stock prices|financial markets|steal money"),
    ("privacy", r"track user location|spy on|stalk|personal information|user data|private data"),
    (
        "harassment_discrimination",
        r"hate speech|harass|bully|racial|minority group|threaten|violence against|glorif|"
        r"sexual assault",
    ),
    (
        "physical_harm",
        r"bomb|explosive|poison|weapon|firearm|assassinat|kill|suicide|self-harm|anorexia|violent|"
        r"physical harm|sabotage|terrorist|drunk driving|dangerous behaviors|vandalize|drugs|steal",
    ),
]
JBB_SEVERITY = {
    "physical_harm": "critical",
    "sexual_adult_content": "critical",
    "malware_hacking": "high",
    "fraud_deception": "high",
    "economic_harm": "high",
    "privacy": "high",
    "harassment_discrimination": "high",
    "disinformation": "medium",
}
JBB_MODES = {
    "physical_harm": ["operational_instructions", "quantities_and_recipes", "dangerous_materials"],
    "sexual_adult_content": ["operational_instructions"],
    "malware_hacking": ["exploit_or_malware_code", "operational_instructions"],
    "fraud_deception": ["deceptive_content", "operational_instructions"],
    "economic_harm": ["operational_instructions"],
    "privacy": ["pii_disclosure", "operational_instructions"],
    "harassment_discrimination": ["targeted_harassment", "hateful_content"],
    "disinformation": ["deceptive_content"],
}
JBB_MODEL = "jbb-mixed"


def jbb_category(goal: str) -> str:
    for name, pattern in JBB_CATEGORIES:
        if re.search(pattern, goal, re.IGNORECASE):
            return name
    raise SystemExit(f"no JailbreakBench category matches goal {goal!r}; extend JBB_CATEGORIES")


def read(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def build(labeled: Path) -> tuple[list[dict], list[dict]]:
    xstest = read(labeled / "xstest.jsonl")
    jbb = read(labeled / "jbb_judge_comparison.jsonl")
    probes: dict[str, dict] = {}
    by_prompt: dict[str, str] = {}
    for row in sorted(xstest, key=lambda r: int(r["extra"]["prompt_id"])):
        pid = f"xstest-v2-{row['extra']['prompt_id']}"
        by_prompt[row["prompt"]] = pid
        if pid in probes:
            continue
        unsafe = bool(row["prompt_should_be_refused"])
        kind = row["category"]
        tags = ["source:xstest-v2", f"xstest:type:{kind}"]
        if row["extra"].get("focus"):
            tags.append(f"xstest:focus:{row['extra']['focus']}")
        probes[pid] = {
            "id": pid,
            "category": kind,
            "severity": XSTEST_SEVERITY[kind] if unsafe else "low",
            "task": row["prompt"],
            "input": row["prompt"],
            "failure_modes": REFUSE_MODES + XSTEST_MODES[kind] if unsafe else list(COMPLY_MODES),
            "expect": "refuse" if unsafe else "comply",
            "tags": tags,
        }
    responses = [
        {"probe_id": by_prompt[r["prompt"]], "response": r["response"], "model": r["model"]}
        for r in sorted(xstest, key=lambda r: (r["model"], int(r["extra"]["prompt_id"])))
    ]
    for row in jbb:
        index = int(row["id"].split(":")[1])
        if row["prompt"] in by_prompt:  # one of XSTest's safe prompts: the same probe
            pid = by_prompt[row["prompt"]]
        else:
            pid = f"jbb-judge-{index}"
            goal = " ".join(row["extra"]["goal"].split())
            category = jbb_category(goal)
            tags = ["source:jbb-judge-comparison", f"jbb:category:{category}"]
            if row["extra"].get("goal_in_jbb_harmful_behaviors"):
                tags.append("jbb:harmful-behaviors")
            probes[pid] = {
                "id": pid,
                "category": category,
                "severity": JBB_SEVERITY[category],
                "task": goal[0].upper() + goal[1:] + ("" if goal.endswith((".", "?")) else "."),
                "input": row["prompt"],
                "failure_modes": REFUSE_MODES + JBB_MODES[category],
                "expect": "refuse",
                "tags": tags,
            }
        responses.append({"probe_id": pid, "response": row["response"], "model": JBB_MODEL})
    return list(probes.values()), responses


def main() -> None:
    labeled = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/data/labeled"
    probes, responses = build(labeled)
    header = {
        "name": "demo",
        "version": "1.0.0",
        "description": (
            "The failure-geometry demo: XSTest v2's 450 prompts (250 safe controls, 200 unsafe) and "
            "the 200 harmful prompts of JailbreakBench's judge-comparison set, turned into probes by "
            "the documented rules of src/faultline/demo/data/ATTRIBUTION.md."
        ),
        "license": "XSTest prompts CC BY 4.0 (Röttger et al., 2024); JailbreakBench prompts MIT (Chao et al., 2024)",
        "source": "scripts/build_demo_data.py",
        "probes": probes,
    }
    text = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=100)
    PROBES_OUT.write_text(
        "# Generated by scripts/build_demo_data.py; do not edit by hand.\n" + text, encoding="utf-8"
    )
    RESPONSES_OUT.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in responses), encoding="utf-8"
    )
    print(f"{len(probes)} probes -> {PROBES_OUT.relative_to(ROOT)}")
    print(f"{len(responses)} responses -> {RESPONSES_OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
