"""``replay:responses.jsonl``: answers recorded earlier, replayed as if a model gave them.

How the demo and the tests run the whole runner without a model, and how a recorded run is
re-scored through the same path. A record with ``error`` replays as that failure; a probe
and sample the file does not answer is an ``error`` case. When the file holds several
models' answers, ``replay:FILE#MODEL`` picks one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultline._util.files import sha256_file
from faultline.errors import UsageError
from faultline.responses.loader import iter_response_batches
from faultline.responses.model import Response
from faultline.targets.base import CallError, Completion, Request

__all__ = ["ReplayTarget"]


class ReplayTarget:
    """Recorded answers, looked up by probe id and sample.

    Args:
        ref: The responses file, optionally followed by ``#MODEL``.

    Raises:
        ResponseError: A line of the file is malformed.
        UsageError: Two records answer the same probe and sample, and no model is chosen.
    """

    provider = "replay"
    secrets: tuple[str, ...] = ()

    def __init__(self, ref: str) -> None:
        path_text, _, chosen = ref.partition("#")
        self.path = Path(path_text)
        self.model = ref
        self.spec = f"replay:{self.path.name}" + (f"#{chosen}" if chosen else "")
        self.chosen = chosen or None
        self._answers: dict[tuple[str, int], Response] = {}
        models: dict[tuple[str, int], str | None] = {}
        for batch in iter_response_batches(self.path):
            for record in batch.responses:
                if self.chosen is not None and record.model != self.chosen:
                    continue
                key = (record.probe_id, record.sample)
                if key in self._answers:
                    raise UsageError(
                        f"{self.path}: probe '{key[0]}' sample {key[1]} is answered more than once "
                        f"(models {models[key]!r} and {record.model!r}); pick one model's answers "
                        f"with replay:{path_text}#MODEL"
                    )
                self._answers[key] = record
                models[key] = record.model
        self.sha256 = sha256_file(self.path)
        named = {m for m in models.values() if m is not None}
        self.answering = self.chosen or (named.pop() if len(named) == 1 else None)

    def describe(self) -> dict[str, Any]:
        """The target as the report records it: the file's name and hash."""
        return {
            "spec": self.spec,
            "provider": self.provider,
            "model": self.answering,
            "source": {"name": self.path.name, "sha256": self.sha256},
        }

    async def complete(self, request: Request) -> Completion:
        """The recorded answer, or its recorded failure."""
        record = self._answers.get((request.probe_id, request.sample))
        if record is None:
            raise CallError(
                "no_answer",
                f"{self.path.name} records no answer for probe '{request.probe_id}' sample {request.sample}",
            )
        if record.error is not None:
            raise CallError("exception", f"recorded error: {record.error}")
        return Completion(
            text=record.response or "", model=record.model, finish_reason=record.finish_reason
        )

    async def aclose(self) -> None:
        """Nothing to release."""
