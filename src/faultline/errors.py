"""The exception tree of faultline.

Every error faultline raises on purpose derives from :class:`FaultlineError`, and carries the
context a person needs to fix it::

    FaultlineError                 exit code 4 unless a subclass says otherwise
     ├── InputError                2: a file or value the user gave is wrong (path, line, field)
     │    ├── LabelError           2: a labelled responses file (human labels, for calibration)
     │    ├── LearnedError         2: a learned-signal model file
     │    ├── ProbeError           2: a probe set
     │    ├── ResponseError        2: a responses file
     │    └── RulePackError        2: a rule pack (bad YAML, a pattern RE2 cannot compile, ...)
     ├── UsageError                2: options that do not fit together
     ├── TargetError               3: the model or another outside service failed
     └── RecordingError            3: a run directory's file could not be written mid-run

The command line maps each class to its exit code (``exit_code``) and prints ``str(error)``,
which is a single sentence naming the file, line and field, what was found and what was
expected. Library code raises; it never prints or exits.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CalibrationError",
    "FaultlineError",
    "InputError",
    "LabelError",
    "LearnedError",
    "ProbeError",
    "RecordingError",
    "ResponseError",
    "RulePackError",
    "TargetError",
    "UsageError",
]


class FaultlineError(Exception):
    """The root of every error faultline raises on purpose.

    Attributes:
        exit_code: The process exit code the command line uses for this error.
    """

    exit_code: int = 4


class InputError(FaultlineError):
    """A file or value given by the user is not what faultline expects.

    The message names the place (``path:line``), the field, what was found and what was
    expected, e.g. ``probes.yaml:12: field 'severity': got 'urgent', expected one of low,
    medium, high, critical``.

    Attributes:
        path: The file that holds the bad input, if any.
        line: The 1-based line in ``path``, if known.
        field: The name of the offending field, if any.
        reason: The message without the location prefix.
    """

    exit_code = 2

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(self._format())

    def __reduce__(self) -> tuple[object, ...]:
        # Keep path, line and field across process boundaries (worker pools).
        return (_rebuild_input_error, (type(self), self.reason, self.path, self.line, self.field))

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}: {what}{self.reason}" if where else f"{what}{self.reason}"


def _rebuild_input_error(
    cls: type[InputError], reason: str, path: str | None, line: int | None, field: str | None
) -> InputError:
    return cls(reason, path=path, line=line, field=field)


class CalibrationError(InputError):
    """A calibration.json given to ``score --calibration`` is malformed."""


class LabelError(InputError):
    """A labelled responses file is malformed: bad JSON, a missing or mistyped field, a duplicate id."""


class LearnedError(InputError):
    """A learned-signal model file is malformed or does not fit the scorer."""


class ProbeError(InputError):
    """A probe set is malformed: bad YAML/JSONL, a missing or mistyped field, a duplicate id."""


class ResponseError(InputError):
    """A responses file is malformed, or names a probe that is not in the probe set."""


class RulePackError(InputError):
    """A rule pack is malformed: bad YAML, an unknown kind, a pattern RE2 cannot compile."""


class UsageError(FaultlineError):
    """Options or arguments that do not fit together, or an unknown built-in name."""

    exit_code = 2


class TargetError(FaultlineError):
    """The model under test, or another outside service, failed.

    Attributes:
        target: The target spec (without secrets) that failed, if known.
    """

    exit_code = 3

    def __init__(self, message: str, *, target: str | None = None) -> None:
        self.target = target
        super().__init__(message)


class RecordingError(FaultlineError):
    """A file of the run directory could not be written while the run went on.

    A full disk or an I/O error while answers were being recorded, or while the reports were
    written. What was committed before is safe, and ``--resume`` continues; exit code 3, as
    for a run that failed outright, since requests were sent.
    """

    exit_code = 3
