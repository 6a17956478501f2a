"""Import public benchmark files (HarmBench, AdvBench, JailbreakBench, XSTest, ...) as probes.

:func:`import_probes` reads a HarmBench, AdvBench, JailbreakBench, XSTest or Do-Not-Answer
file, or any CSV / JSONL file whose columns are named with ``mapping``, and returns probe
records (dicts in probe-field order); :func:`render_probe_set` turns them into the bytes of a
YAML probe set that :func:`~faultline.probes.load_probes` reads. A source category goes to a
faultline category by the route table (:data:`ROUTES`); broad source categories, and files
with none, go through :data:`KEYWORD_RULES`. docs/probes.md documents every table.

The stage in modules: ``tables.py`` reads the category, route and keyword tables from the
data file ``tables.yaml``; ``formats.py`` holds each format's row builder and the
:data:`FORMATS` registry; ``reading.py`` checks the options and reads CSV / JSONL rows;
``writing.py`` renders the probe set.

To add a format, write a builder ``(row, context) -> _Draft`` in ``formats.py``, register a
:class:`Format` in :data:`FORMATS`, add its rows to ``routes`` in ``tables.yaml`` and to the
tables of docs/probes.md; the tests run every format.
"""

from __future__ import annotations

from faultline.probes.importers.formats import FORMATS, GENERIC_FIELDS, Format, one_sentence
from faultline.probes.importers.reading import import_probes, parse_map_options
from faultline.probes.importers.tables import (
    CATEGORY_DEFAULTS,
    COMPLY_MODES,
    GENERAL_CATEGORY,
    KEYWORD_RULES,
    REFUSE_MODES,
    ROUTES,
    Route,
    infer_category,
)
from faultline.probes.importers.writing import render_probe_set

__all__ = [
    "CATEGORY_DEFAULTS",
    "COMPLY_MODES",
    "FORMATS",
    "GENERAL_CATEGORY",
    "GENERIC_FIELDS",
    "KEYWORD_RULES",
    "REFUSE_MODES",
    "ROUTES",
    "Format",
    "Route",
    "import_probes",
    "infer_category",
    "one_sentence",
    "parse_map_options",
    "render_probe_set",
]
