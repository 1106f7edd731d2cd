"""Progress of a stage: a rich bar on a terminal, and plain periodic lines where output is not one (CI logs,
``nohup``, a pipe), where a live bar would print nothing until the end."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn, TaskID

LINE_EVERY_S = 30.0


def stage_progress(
    *columns: str | ProgressColumn, enabled: bool = True, transient: bool = False, console: Console | None = None
) -> Progress:
    """A ``rich.progress.Progress`` with ``columns``: live on a terminal, one line every 30 s (and at the end)
    elsewhere, nothing when not ``enabled``."""
    console = console or Console()
    if not enabled:
        return Progress(*columns, console=console, disable=True)
    if console.is_terminal:
        return Progress(*columns, console=console, transient=transient)
    return LineProgress(*columns, console=console)


class LineProgress(Progress):
    """A ``Progress`` that prints its tasks as plain lines: at the first update, then at most every ``every_s``
    seconds, and once more with the final counts when it stops."""

    def __init__(self, *columns: str | ProgressColumn, console: Console, every_s: float = LINE_EVERY_S) -> None:
        super().__init__(*columns, console=console, disable=True)
        self.every_s = every_s
        self._printed: dict[TaskID, float] = {}

    def update(self, task_id: TaskID, **kwargs: Any) -> None:
        super().update(task_id, **kwargs)
        self._maybe_print(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._maybe_print(task_id)

    def stop(self) -> None:
        for task_id in list(self._printed):
            self._print(task_id)
        self._printed.clear()
        super().stop()

    def _maybe_print(self, task_id: TaskID) -> None:
        last = self._printed.get(task_id)
        if self._tasks[task_id].finished:  # stop() prints the final line, with the last fields
            self._printed.setdefault(task_id, time.monotonic())
        elif last is None or time.monotonic() - last >= self.every_s:
            self._print(task_id)

    def _print(self, task_id: TaskID) -> None:
        self._printed[task_id] = time.monotonic()
        task = self._tasks[task_id]
        parts = [f"{task.description} {task.completed:g}/{task.total:g}" if task.total else task.description]
        parts += [f"{k} {v}" for k, v in task.fields.items()]
        parts.append(f"{_duration(task.elapsed or 0.0)} elapsed")
        if task.time_remaining and not task.finished:
            parts[-1] += f", about {_duration(task.time_remaining)} left"
        self.console.print("  ".join(parts), highlight=False, markup=False)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
