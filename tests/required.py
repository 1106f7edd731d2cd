"""What a test needs from outside the checkout (the real data in ``../shared/data``): where it is missing the test is
skipped, except under ``CI=true``, where it is always there and a missing one fails the test instead."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI sets it)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(what: str) -> NoReturn:
    """Skip the test for want of ``what``; fail it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{what} (required under CI=true)", pytrace=False)
    pytest.skip(what)
