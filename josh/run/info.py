"""What produced a run folder: the components by name, the recipe, the josh version and the git commit.

Stored as ``run`` in ``summary.json`` (evaluations) and ``stats.json`` (rollouts) and written into the model card
of a training run, so a result can be traced back to the code and settings that made it.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from josh.llm.models import adapter_base, is_adapter_dir
from josh.version import __version__

SOURCE_ROOT = Path(__file__).resolve().parents[2]


class RunInfo(BaseModel):
    """The provenance of one run; ``adapter`` is set when the model is a trained adapter (``model`` is its base);
    ``judge`` (``BACKEND:MODEL``), ``judge_prompt_version`` and ``judge_max_tokens`` when an LLM judge scored the
    run's replies;
    ``env_options`` when the environment took options (``--env-option``)."""

    josh_version: str
    git_commit: str | None = None
    command: str | None = None
    started: str
    env: str | None = None
    data: str | None = None
    env_options: dict[str, Any] | None = None
    split: str | None = None
    agent: str | None = None
    backend: str | None = None
    model: str | None = None
    adapter: str | None = None
    user: str | None = None
    user_backend: str | None = None
    user_model: str | None = None
    recipe: str | None = None
    judge: str | None = None
    judge_prompt_version: str | None = None
    judge_max_tokens: int | None = None


@functools.cache
def git_commit(root: Path = SOURCE_ROOT) -> str | None:
    """The commit of the source checkout josh runs from (``+dirty`` with uncommitted changes), or None."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD"], capture_output=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 1 else "")


def split_adapter(model: str | None) -> tuple[str | None, str | None]:
    """(base model, adapter folder) for a model name that may be a ``josh train`` checkpoint folder."""
    if model and is_adapter_dir(model):
        return adapter_base(model), str(Path(model).resolve())
    return model, None


def run_info(**fields: Any) -> RunInfo:
    """A ``RunInfo`` for this process: version, commit, command line and start time, plus ``fields``."""
    model, adapter = split_adapter(fields.pop("model", None))
    return RunInfo(
        josh_version=__version__,
        git_commit=git_commit(),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else None,
        started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model=model,
        adapter=fields.pop("adapter", None) or adapter,
        **fields,
    )
