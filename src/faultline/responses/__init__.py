"""Responses: what a model answered to each probe, as recorded in JSONL or Parquet files.

One record per line (or row): ``probe_id``, ``response`` (required unless ``error``),
``sample``, ``model``, ``error``, ``finish_reason``, ``usage`` and ``reasoning`` (a reasoning
model's thinking, set apart from its answer: :mod:`faultline.responses.reasoning`). Readers stream files in
pieces, so millions of answers never have to fit in memory at once; a spec may name a file
(``.jsonl``, ``.jsonl.gz``, ``.ndjson``, ``.ndjson.gz``, ``.parquet``), a directory or a glob
pattern (:mod:`faultline.responses.sources`). To read another format, see that module.
"""

from __future__ import annotations

from faultline.responses.check import Answer, ResponseChecker, check_known
from faultline.responses.loader import ResponseBatch, iter_response_batches, load_responses
from faultline.responses.model import Response

__all__ = [
    "Answer",
    "Response",
    "ResponseBatch",
    "ResponseChecker",
    "check_known",
    "iter_response_batches",
    "load_responses",
]
