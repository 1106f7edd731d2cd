"""How a ``josh`` command reports a failure: one red line that names the problem and the fix, the traceback only
with ``josh --verbose`` (or ``JOSH_VERBOSE=1``, e.g. under ``accelerate launch -m josh.training``).

Errors josh raises on purpose (bad input, a missing file or package, an unreachable backend) carry a message
written for the reader and exit with code 2; anything else is a bug and exits with code 1 after a hint to rerun
with ``--verbose``. Ctrl-C exits with code 130 after saying that rerunning the command resumes.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer

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

_verbose = False


def set_verbose(on: bool) -> None:
    global _verbose
    _verbose = on


def verbose() -> bool:
    """Whether failures show their traceback (``josh --verbose`` or ``JOSH_VERBOSE=1``)."""
    return _verbose or os.environ.get("JOSH_VERBOSE", "") not in ("", "0")


def describe(exc: BaseException) -> tuple[str, bool]:
    """(the message to print, whether the failure is one josh expects) for an exception."""
    from pydantic import ValidationError

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
