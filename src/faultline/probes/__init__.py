"""Probes: the scenarios sent to a model, and the loaders for probe-set files.

A probe names its threat ``category``, its ``severity``, the ``task`` in a sentence, the
``input`` sent to the model and the ``failure_modes`` it is designed to elicit. Probe sets are
data files (YAML or JSONL); built-in sets live in ``probes/builtin/`` and are loaded by name.
To add a built-in set, drop a YAML file with a ``name``, ``version`` and ``probes`` list into
that directory; ``tests/contracts`` checks it automatically.
"""

from __future__ import annotations

from faultline.probes.loader import builtin_probe_sets, load_probes
from faultline.probes.model import SEVERITIES, Expect, Message, Probe, Severity
from faultline.probes.probeset import ProbeSet
from faultline.probes.vocabulary import Category, category_vocabulary

__all__ = [
    "SEVERITIES",
    "Category",
    "Expect",
    "Message",
    "Probe",
    "ProbeSet",
    "Severity",
    "builtin_probe_sets",
    "category_vocabulary",
    "load_probes",
]
