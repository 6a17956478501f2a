"""The terminal: one console for results (stdout), one for messages (stderr), and progress."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

if TYPE_CHECKING:
    from faultline.pipeline import ProgressCallback

__all__ = ["err", "out", "progress"]

_width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "100"))
out = Console(highlight=False, width=_width, soft_wrap=False)
err = Console(stderr=True, highlight=False, width=_width)


@contextmanager
def progress(label: str) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr while scoring, when stderr is a terminal; else nothing."""
    if not err.is_terminal:
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(stage: str, done: int, total: int) -> None:
            if stage == "score":
                bar.update(task, completed=done, total=total or None)
            else:
                bar.update(task, description="building report")

        yield update
