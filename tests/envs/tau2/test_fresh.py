"""The evaluator's fresh environments (``josh.envs.tau2.fresh``): τ²'s own hash of every database they reach, and
the pristine load never changed by the conversations scored on it."""

from __future__ import annotations

from importlib import import_module

import pytest
from tau2.utils.utils import get_dict_hash

from josh.envs.tau2.fresh import _PRISTINE, evaluation_domain, fresh_environment
from tests.envs.tau2.helpers import run_josh, sample
from tests.envs.tau2.test_rewards import _perturbations


def _tau2_hash(environment) -> str:
    return get_dict_hash(environment.tools.db.model_dump())


@pytest.mark.parametrize("domain", ("airline", "retail"))
def test_scoring_never_changes_the_pristine_load_and_hashes_as_tau2_does(tau2_envs, domain: str) -> None:
    env = tau2_envs(domain)
    evaluation_domain(domain)
    fresh_environment(domain)
    pristine = _PRISTINE[domain]
    before = _tau2_hash(pristine)
    assert before == _tau2_hash(import_module(f"tau2.domains.{domain}.environment").get_environment())
    task = next(t for t in sample(env.tasks("base"), 3) if t.goals)
    for name, (script, closing) in _perturbations(task).items():
        state, messages = run_josh(env, task, script, closing)
        env.reward(state, messages)
        replayed = fresh_environment(domain)
        for _, call, _ in state.calls:  # the same calls on a fresh environment: τ²'s hash, josh's hash
            replayed.get_response(call)
        assert replayed.get_db_hash() == _tau2_hash(replayed), name
        assert replayed.get_db_hash() == state.environment.tools.get_db_hash(), name
    assert _tau2_hash(pristine) == before


def test_a_non_tabular_domain_gets_a_deep_copy(tau2_envs) -> None:
    tau2_envs("telecom")
    first, second = fresh_environment("telecom"), fresh_environment("telecom")
    assert first.tools.db is not second.tools.db and first.get_db_hash() == second.get_db_hash()


def test_the_evaluation_domain_is_registered_once() -> None:
    from tau2.registry import registry

    assert evaluation_domain("retail") == evaluation_domain("retail") == "josh-fresh-retail"
    assert registry.get_domains().count("josh-fresh-retail") == 1
