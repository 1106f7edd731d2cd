"""How a ``josh`` command reports a failure: one red line that names the problem and the fix, the traceback only
with ``josh --verbose`` (or ``JOSH_VERBOSE=1``, e.g. under ``accelerate launch -m josh.training``).

Errors josh raises on purpose (bad input, a missing file or package, an unreachable backend) carry a message
written for the reader and exit with code 2; anything else is a bug and exits with code 1 after a hint to rerun
with ``--verbose``. Ctrl-C exits with code 130 after saying that rerunning the command resumes. A bad line of a
JSONL file is named with its fix (``--skip-bad-lines``, which ``skips_bad_lines`` gives a command).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from pydantic import ValidationError

from josh.util.jsonl import SKIP_ENV, SKIP_FIX, CorruptLineError, skipping_bad_lines

F = TypeVar("F", bound=Callable[..., Any])

VLLM_INSTALL = (
    "pip install 'josh-agents[vllm]' -c constraints-gpu.txt on a CUDA machine, or make vllm-env for vLLM's CPU build"
)

TRAIN_MODULES = ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes", "gguf", "llguidance"]

EXTRAS = {
    "vllm": VLLM_INSTALL,
    "ray": "pip install 'josh-agents[ray]'",
    "wandb": "pip install 'josh-agents[wandb]'",
    "tau2": "pip install 'josh-agents[tau2]'",
    "openenv": "pip install 'josh-agents[openenv]'",
    "deepspeed": "pip install 'josh-agents[deepspeed]'",
    "liger_kernel": "pip install 'josh-agents[liger]'",
    **dict.fromkeys(TRAIN_MODULES, "pip install 'josh-agents[train]'"),
}
"""The extra that brings each optional top-level module, named by the distribution (``josh`` on the package index is
an unrelated package)."""

EXIT_CODES: dict[int, str] = {
    0: "done",
    1: "finished incomplete (conversations or trees whose LLM failed are not counted: rerun the same command to redo "
    "them; `josh check-env`: a check failed), or an unexpected error, a bug in josh (`josh --verbose` shows where)",
    2: "bad input or something missing, before or during the run: an unknown option or recipe key, a bad line of a "
    "file (`--skip-bad-lines`), a missing file, model, data set or package, a backend that cannot be reached",
    130: "interrupted (Ctrl-C, or SIGTERM from a scheduler): what finished is kept; rerunning the same command resumes",
}

_verbose = False


def set_verbose(on: bool) -> None:
    global _verbose
    _verbose = on


def verbose() -> bool:
    """Whether failures show their traceback (``josh --verbose`` or ``JOSH_VERBOSE=1``)."""
    return _verbose or os.environ.get("JOSH_VERBOSE", "") not in ("", "0")


def describe(exc: BaseException) -> tuple[str, bool]:
    """(the message to print, whether the failure is one josh expects) for an exception."""
    if isinstance(exc, CorruptLineError):
        return f"{exc}: {SKIP_FIX}", True
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()), True
    if isinstance(exc, ModuleNotFoundError) and exc.name and str(exc).startswith("No module named"):
        top = exc.name.split(".")[0]
        hint = EXTRAS.get(top, f"pip install {top}")
        return f"the Python package {top!r} is not installed: {hint}", True
    if isinstance(exc, ValueError | OSError | ImportError) or _is_josh_error(exc):
        return str(exc) or type(exc).__name__, True
    return f"{type(exc).__name__}: {exc}", False


def _is_josh_error(exc: BaseException) -> bool:
    """Errors josh defines for people to read (LLM, download and data-format errors and the like)."""
    return type(exc).__module__.startswith("josh.") and type(exc).__name__.endswith("Error")


def report(exc: BaseException, *, code: int = 2) -> typer.Exit:
    """Print ``exc`` as one red line (plus the traceback when verbose) and return the ``typer.Exit`` to raise."""
    message, expected = describe(exc)
    if verbose():
        traceback.print_exception(exc, file=sys.stderr)
    typer.secho(f"error: {message}", fg="red", err=True)
    if not expected and not verbose():
        typer.echo("this looks like a bug in josh: rerun with `josh --verbose ...` for the traceback", err=True)
    return typer.Exit(code if expected else 1)


@contextmanager
def reported(code: int = 2, *, interrupted: str = "") -> Iterator[None]:
    """Turn any failure inside the block into one line and an exit code; Ctrl-C prints ``interrupted``."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.BadParameter):  # typer's own: it prints them and exits
        raise
    except KeyboardInterrupt:
        typer.secho(f"interrupted{': ' + interrupted if interrupted else ''}", fg="yellow", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:
        raise report(exc, code=code) from None


def reports_errors(func: F) -> F:
    """A command decorator: failures become one line (see ``reported``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with reported():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


SKIP_BAD_LINES_HELP = (
    "skip lines of the JSONL files read that are not valid JSON or not the record expected (each is reported)"
)
SHOWN_SKIPS = 5


def skips_bad_lines(func: F) -> F:
    """A command decorator: adds ``--skip-bad-lines`` (or ``$JOSH_SKIP_BAD_LINES=1``), under which the JSONL readers
    skip bad lines (``josh.util.jsonl.skipping_bad_lines``), and reports each line skipped on standard error."""
    option = inspect.Parameter(
        "skip_bad_lines",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(False, "--skip-bad-lines", envvar=SKIP_ENV, help=SKIP_BAD_LINES_HELP),
        annotation=bool,
    )

    @functools.wraps(func)
    def wrapper(*args: Any, skip_bad_lines: bool = False, **kwargs: Any) -> Any:
        with skipping_bad_lines(skip_bad_lines) as skipped:
            try:
                return func(*args, **kwargs)
            finally:
                _report_skipped(skipped)

    signature = inspect.signature(func)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), option])  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _report_skipped(skipped: dict[tuple[str, int], str]) -> None:
    if not skipped:
        return
    shown = [f"{path}: line {number} {reason}" for (path, number), reason in list(skipped.items())[:SHOWN_SKIPS]]
    more = len(skipped) - len(shown)
    typer.secho(
        f"skipped {len(skipped)} bad line{'s' if len(skipped) > 1 else ''} (--skip-bad-lines): " + "; ".join(shown)
        + (f"; and {more} more" if more else ""),
        fg="yellow",
        err=True,
    )  # fmt: skip
