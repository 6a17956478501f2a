"""Check responses against their probe set: every probe known, no case answered twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from faultline._util.text import did_you_mean
from faultline.errors import ResponseError

__all__ = ["Answer", "ResponseChecker", "check_known"]


class Answer(Protocol):
    """Anything that says which case it answers: a response, or a scored case."""

    @property
    def probe_id(self) -> str: ...  # noqa: D102

    @property
    def sample(self) -> int: ...  # noqa: D102

    @property
    def model(self) -> str | None: ...  # noqa: D102


def check_known(
    answers: Sequence[Answer],
    probes: Mapping[str, object],
    *,
    set_name: str = "probes",
    lines: Sequence[int] | None = None,
    path: Path | None = None,
) -> None:
    """Check that every answer names a probe in ``probes``.

    Raises:
        ResponseError: Naming the file and line of the first unknown probe id.
    """
    for i, a in enumerate(answers):
        if a.probe_id not in probes:
            raise ResponseError(
                f"probe '{a.probe_id}' is not in probe set '{set_name}'{did_you_mean(a.probe_id, probes)}",
                path=path,
                line=lines[i] if lines is not None else i + 1,
                field="probe_id",
            )


class ResponseChecker:
    """Checks batches of answers in turn, remembering every case seen so far."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int, str | None], int | None] = {}
        self.models: set[str | None] = set()

    @property
    def answered(self) -> set[str]:
        """The ids of the probes answered so far."""
        return {key[0] for key in self._seen}

    def check_unique(
        self,
        answers: Sequence[Answer],
        lines: Sequence[int] | None = None,
        path: Path | None = None,
    ) -> None:
        """Check that no (probe, sample, model) is answered twice, across all batches.

        Args:
            answers: The batch.
            lines: Each answer's line in ``path`` (default: its position in the batch, from 1).
            path: The file the batch comes from, for messages.

        Raises:
            ResponseError: Naming the file and line of the repeat and of the first answer.
        """
        seen = self._seen
        for i, a in enumerate(answers):
            key = (a.probe_id, a.sample, a.model)
            line = lines[i] if lines is not None else i + 1
            if key in seen:
                by = f" by model '{a.model}'" if a.model is not None else ""
                first = seen[key]
                where = "" if first is None else f" (first at line {first})"
                raise ResponseError(
                    f"probe '{a.probe_id}' sample {a.sample} is answered twice{by}{where}; "
                    "give each generation its own sample number",
                    path=path,
                    line=line,
                    field="sample",
                )
            seen[key] = line
            self.models.add(a.model)
