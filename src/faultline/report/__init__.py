"""Reports: report.json (the source of truth) and the views rendered from it (report.md).

``build_report`` computes the metrics and the failure geometry and writes the files;
each view is a pure function of the report data, so it can be re-rendered from a saved
report.json. To add a view, write a ``render_*`` function over that data.
"""

from __future__ import annotations

from faultline.report.build import build_report, run_metadata, write_report
from faultline.report.jsonio import encode_report, read_report, write_report_json
from faultline.report.markdown import escape_md, render_markdown
from faultline.report.model import SCHEMA_VERSION, Report

__all__ = [
    "SCHEMA_VERSION",
    "Report",
    "build_report",
    "encode_report",
    "escape_md",
    "read_report",
    "render_markdown",
    "run_metadata",
    "write_report",
    "write_report_json",
]
