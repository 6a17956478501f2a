"""The failure geometry in words: what each view says about the mutual information.

Normalised MI is 1 when both labelings are constant and 0 when only one is (docs/metrics.md):
numbers that say nothing about structure. So a label is read only when the clusters and the
label both vary; with one cluster, or a label every scored case shares, the reading says it
does not apply, and the views name the label the clusters align with only when one stands
out. report.md, report.html and the console all read the geometry through
:func:`geometry_reading`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LABELS", "GeometryReading", "geometry_reading"]

LABELS = ("category", "severity", "pass_fail")
"""The labels the clusters are measured against, in the order the views list them."""

_FOLLOWS = {
    "category": "the clusters follow threat category",
    "severity": "the clusters follow severity",
    "pass_fail": "the clusters separate passes from failures",
}
_WEAK = 0.05
"""Below this normalised MI a label is "hardly" followed, and never named as aligned."""


@dataclass(frozen=True)
class GeometryReading:
    """What the geometry's mutual information says.

    Attributes:
        n_clusters: How many clusters there are.
        readings: A one-line reading of each label's normalised MI, in :data:`LABELS` order.
        aligned: The labels the clusters align with most (several when tied); empty when no
            label is followed more than hardly, or none applies.
        applicable: The labels whose MI says something: the clusters and the label both vary.
    """

    n_clusters: int
    readings: dict[str, str]
    aligned: tuple[str, ...]
    applicable: tuple[str, ...]

    def clusters(self, kind: str = "") -> str:
        """The number of clusters with its noun: ``1 cluster``, ``3 KMeans clusters``."""
        return f"{self.n_clusters} {kind}cluster" + ("" if self.n_clusters == 1 else "s")

    def conclusion(self, emphasis: Callable[[str], str] = str) -> str:
        """One sentence on what the clusters align with, each label passed through ``emphasis``."""
        if self.n_clusters < 2:
            return (
                "Every scored case is in one cluster (they do not fall at two distinct points), "
                "so the mutual information says nothing about structure."
            )
        if not self.applicable:
            return "Every scored case has the same category, severity and outcome: no label varies."
        if not self.aligned:
            return "The clusters align with none of the labels."
        names = [emphasis(name.replace("_", "/")) for name in self.aligned]
        if len(names) == 1:
            return f"The clusters align most with {names[0]}."
        return f"The clusters align equally with {', '.join(names[:-1])} and {names[-1]}."


def geometry_reading(obs: Mapping[str, Any], metrics: Mapping[str, Any]) -> GeometryReading:
    """Read the geometry's normalised mutual information.

    Args:
        obs: The report's ``observability`` object.
        metrics: The report's ``aggregate_metrics``, computed over the same scored cases:
            they tell which labels are constant.
    """
    n_clusters = int(obs["n_clusters"])
    nmi: Mapping[str, float] = obs["normalized_mutual_information"]
    constant = _constant_labels(metrics)
    readings: dict[str, str] = {}
    applicable: dict[str, float] = {}
    for name in LABELS:
        if n_clusters < 2:
            readings[name] = "Not applicable: there is only one cluster"
        elif name in constant:
            readings[name] = "Not applicable: " + constant[name]
        else:
            readings[name] = f"{_strength(nmi[name])} {_FOLLOWS[name]}"
            applicable[name] = nmi[name]
    top = max(applicable.values(), default=0.0)
    aligned = tuple(
        name
        for name, value in applicable.items()
        if top >= _WEAK and math.isclose(value, top, rel_tol=1e-9, abs_tol=1e-12)
    )
    return GeometryReading(n_clusters, readings, aligned, tuple(applicable))


def _constant_labels(metrics: Mapping[str, Any]) -> dict[str, str]:
    """Each label every scored case shares, with the reason its MI does not apply."""
    counts = metrics["counts"]
    constant = {}
    if len(counts["categories"]) < 2:
        constant["category"] = "every case has the same category"
    if len(metrics["by_severity"]) < 2:
        constant["severity"] = "every case has the same severity"
    if not counts["failed"]:
        constant["pass_fail"] = "every case passed"
    elif not counts["passed"]:
        constant["pass_fail"] = "every case failed"
    return constant


def _strength(nmi: float) -> str:
    if nmi >= 0.5:
        return "Strongly:"
    if nmi >= 0.2:
        return "Partly:"
    if nmi >= _WEAK:
        return "Weakly:"
    return "Hardly:"
