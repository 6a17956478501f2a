"""``replay:responses.jsonl``: answers recorded earlier, replayed as if a model gave them.

How the demo and the tests run the whole runner without a model, and how a recorded run is
re-scored through the same path. A record with ``error`` replays as that failure, with its
``kind``, ``status``, ``message`` and ``attempts`` as recorded (never retried); a probe
and sample the file does not answer is an ``error`` case. When the file holds several
models' answers, ``replay:FILE#MODEL`` picks one. A path may hold ``#`` itself
(``replay:run#1/responses.jsonl``): the whole spec is the path when that file exists, and
otherwise the model follows the last ``#`` whose path before it exists (the last ``#`` when
none does, so that the error names the file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast, get_args

from faultline._util.files import sha256_file
from faultline.errors import UsageError
from faultline.responses.loader import iter_response_batches
from faultline.responses.model import Response
from faultline.targets.base import CallError, Completion, FailureKind, Request

__all__ = ["ReplayTarget"]

_KINDS = frozenset(get_args(FailureKind))


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
        path_text, chosen = _path_and_model(ref)
        self.path = Path(path_text)
        self.model = ref
        self.spec = f"replay:{self.path.name}" + (f"#{chosen}" if chosen else "")
        self.chosen = chosen or None
        self._answers: dict[tuple[str, int], Response] = {}
        models: dict[tuple[str, int], str | None] = {}
        seen: set[str | None] = set()
        for batch in iter_response_batches(self.path):
            for line, record in zip(batch.lines, batch.responses, strict=True):
                seen.add(record.model)
                if self.chosen is not None and record.model != self.chosen:
                    continue
                key = (record.probe_id, record.sample)
                if key in self._answers:
                    raise UsageError(_duplicate(self.path, line, key, models[key], record.model))
                self._answers[key] = record
                models[key] = record.model
        if self.chosen is not None and not self._answers:
            named = ", ".join(sorted(m for m in seen if m is not None)) or "none"
            raise UsageError(
                f"{self.path}: no answer is from model {self.chosen!r}; the file's models: {named}"
            )
        self.sha256 = sha256_file(self.path)
        answered = {m for m in models.values() if m is not None}
        self.answering = self.chosen or (answered.pop() if len(answered) == 1 else None)

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
            raise _recorded_failure(record.error)
        usage = record.usage
        return Completion(
            text=record.response or "",
            model=record.model,
            finish_reason=record.finish_reason,
            input_tokens=None if usage is None else usage.input_tokens,
            output_tokens=None if usage is None else usage.output_tokens,
            reasoning=record.reasoning,
        )

    async def aclose(self) -> None:
        """Nothing to release."""


def _recorded_failure(error: str | Mapping[str, Any]) -> CallError:
    """A recorded failure as it was: its kind, status and message.

    A kind faultline does not know becomes ``exception``. Never retried, never fatal.
    """
    if isinstance(error, str):
        return CallError("exception", error, final=True)
    kind, message, status = error.get("kind"), error.get("message"), error.get("status")
    attempts = _count(error.get("attempts"))
    return CallError(
        cast("FailureKind", kind) if kind in _KINDS else "exception",
        message if isinstance(message, str) else json.dumps(dict(error), ensure_ascii=False),
        status=_count(status),
        final=True,
        attempts=attempts if attempts is not None and attempts > 0 else None,
    )


def _count(value: Any) -> int | None:
    """A recorded whole number (a status, a count of attempts), or ``None``: never a bool."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _path_and_model(ref: str) -> tuple[str, str]:
    """The file and the model (``""``: none) of ``FILE`` or ``FILE#MODEL``.

    ``FILE`` may hold ``#``: the whole of ``ref`` is the file when it exists; otherwise the
    model is what follows the last ``#`` that has an existing file before it, or, when none
    has, the last ``#``.
    """
    if "#" not in ref or Path(ref).is_file():
        return ref, ""
    cuts = [i for i, ch in enumerate(ref) if ch == "#"]
    for cut in reversed(cuts):
        if Path(ref[:cut]).is_file():
            return ref[:cut], ref[cut + 1 :]
    return ref[: cuts[-1]], ref[cuts[-1] + 1 :]


def _duplicate(
    path: Path, line: int, key: tuple[str, int], first: str | None, again: str | None
) -> str:
    where = f"{path}:{line}: probe '{key[0]}' sample {key[1]}"
    if first == again:
        return f"{where} is answered a second time; keep one answer per probe and sample"
    return (
        f"{where} is answered by more than one model ({first!r} and {again!r}); pick one "
        f"model's answers with replay:{path}#MODEL"
    )
