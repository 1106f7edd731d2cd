"""Keep the terminal for stage lines, progress bars and tables: library noise goes to a log file.

Inside ``noise_to(path)`` everything written to ``sys.stderr`` is appended to ``path`` instead: library warnings
(``FutureWarning``, the ``pin_memory`` notice), logging records (transformers, TRL, Ray's token notice, josh's own
warnings) and the progress bars of datasets, transformers and huggingface_hub. josh's own progress (rich bars on
stdout, ``terminal()`` for the trainer's bar) still reaches the terminal. ``sys.stderr`` is replaced by a router for
the outermost block and is the original object again after it; the router forwards to the real stream outside
blocks, so a logging handler created inside one (e.g. Ray's, at ``import ray``) keeps working after it. Blocks nest;
with ``josh --verbose`` nothing is redirected.

A few libraries log to standard output (DeepSpeed's logger, whose first record on a machine without a GPU is
"Setting accelerator to CPU"): inside a block their records are sent to standard error, and so into the log.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from josh.util.errors import verbose


class _Router(io.TextIOBase):
    """A stand-in for ``sys.stderr`` that writes to the innermost log file, or to the real stream."""

    def __init__(self, real: IO[str]) -> None:
        self.real = real
        self.targets: list[IO[str]] = []

    @property
    def target(self) -> IO[str]:
        return self.targets[-1] if self.targets else self.real

    def write(self, text: str) -> int:
        try:
            return self.target.write(text)
        except ValueError:  # a closed stream (e.g. a test runner's capture): drop rather than fail the caller
            return 0

    def flush(self) -> None:
        with suppress(ValueError):
            self.target.flush()

    def isatty(self) -> bool:
        return not self.targets and self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.real, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


STDOUT_LOGGERS = ("DeepSpeed",)  # loggers whose own handler writes to sys.stdout


class _CurrentStderr(logging.Handler):
    """Writes each record to whatever ``sys.stderr`` is when it is emitted (the router, inside ``noise_to``)."""

    def emit(self, record: logging.LogRecord) -> None:
        with suppress(ValueError):
            sys.stderr.write(self.format(record) + "\n")


class _ToStderr(logging.Filter):
    """A logger filter that hands every record to ``_CurrentStderr`` and stops the logger's own handlers."""

    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter("[%(name)s] [%(levelname)s] [%(filename)s:%(lineno)d] %(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:
        self.handler.handle(record)
        return False


@contextmanager
def _routed() -> Iterator[_Router]:
    """``sys.stderr`` replaced by a router for the outermost block and put back after it, and the ``STDOUT_LOGGERS``
    filtered into it meanwhile (filters survive a library's later logger setup, so this works before the library is
    imported). A handler that took the router as its stream keeps writing through it to the real stream."""
    installed = not isinstance(sys.stderr, _Router)
    router = _Router(sys.stderr) if installed else sys.stderr
    sys.stderr = router
    added = []
    for name in STDOUT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ToStderr) for f in logger.filters):
            added.append((logger, _ToStderr()))
            logger.addFilter(added[-1][1])
    try:
        yield router
    finally:
        for logger, stdout_filter in added:
            logger.removeFilter(stdout_filter)
        if installed and sys.stderr is router:
            sys.stderr = router.real


def terminal() -> IO[str]:
    """The real standard error stream, also inside ``noise_to`` (for josh's own progress output)."""
    return sys.stderr.real if isinstance(sys.stderr, _Router) else sys.stderr


@contextmanager
def noise_to(path: str | Path | None) -> Iterator[Path | None]:
    """Append everything written to standard error inside the block to ``path`` (None, or ``josh --verbose``:
    leave it on the terminal). Yields the log file's path."""
    if path is None or verbose():
        yield None
        return
    log = Path(path)
    log.parent.mkdir(parents=True, exist_ok=True)
    with _routed() as router, log.open("a", encoding="utf-8", buffering=1) as handle:
        handle.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(sys.argv[1:])}\n")
        router.targets.append(handle)
        try:
            yield log
        finally:
            router.targets.remove(handle)
