"""Responses: what a model answered to each probe, as recorded in JSONL files.

One record per line: ``probe_id``, ``response`` (required unless ``error``), ``sample``,
``model``, ``error`` and ``finish_reason``. Readers stream a file in chunks, so a file of
millions of answers never has to fit in memory at once. To read another format, add a
reader that yields :class:`ResponseBatch` objects.
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
