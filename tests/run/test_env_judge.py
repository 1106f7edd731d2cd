"""The judge an environment option names: its LLM key (shared with the run's own backend and model, settings and
endpoint included), and the blocking call an environment makes from inside a running conversation's event loop."""

from __future__ import annotations

import asyncio

import pytest

from josh.core.llm import LLMError, failures_noted
from josh.llm.scripted import ScriptedLLM
from josh.run.components import ComponentOptions, wanted_judge
from josh.run.env_judge import blocking_chat
from josh.types import user


def test_a_judge_naming_the_runs_backend_and_model_shares_its_endpoint_and_settings() -> None:
    spec = ComponentOptions(
        backend="openai", model="m", base_url="http://127.0.0.1:8000/v1", llm_options={"timeout_s": 5},
        env_options={"judge": "openai:m"},
    )  # fmt: skip
    assert wanted_judge(spec) == (("openai", "m", "http://127.0.0.1:8000/v1"), {"timeout_s": 5})
    other = spec.model_copy(update={"env_options": {"judge": "hf:smollm2"}})
    assert wanted_judge(other) == (("hf", "smollm2", None), {})
    assert wanted_judge(ComponentOptions()) is None


def test_a_judge_with_its_own_settings_is_built_with_them_as_every_judge() -> None:
    """``judge=BACKEND:MODEL`` plus ``judge_options`` (the keys of ``--judge-option``), checked as env options."""
    spec = ComponentOptions(
        backend="openai", model="m", llm_options={"timeout_s": 5},
        env_options={"judge": "openai:m", "judge_options": {"base_url": "http://127.0.0.1:9/v1", "timeout_s": 2}},
    )  # fmt: skip
    assert wanted_judge(spec) == (("openai", "m", "http://127.0.0.1:9/v1"), {"timeout_s": 2})
    from josh.envs import ENVIRONMENTS

    ENVIRONMENTS.check("tau2-telecom", options=spec.env_options)
    with pytest.raises(ValueError, match="judge_options"):
        ENVIRONMENTS.check("tau2-telecom", options={"judge": "openai:m", "judge_options": "fast"})


def test_the_blocking_call_answers_inside_a_running_event_loop() -> None:
    ask = blocking_chat(ScriptedLLM(lambda messages, tools, index: f"seen {messages[-1].content}"))

    async def conversation() -> str:  # an env's reward runs synchronously inside the conversation's loop
        return ask([user("hello")])

    assert asyncio.run(conversation()) == "seen hello"


def test_a_failed_judge_request_is_a_runtime_error() -> None:
    def down(messages, tools, index):
        raise LLMError("server down")

    with pytest.raises(RuntimeError, match="judge request failed: server down"):
        blocking_chat(ScriptedLLM(down))([user("hello")])


def test_a_loop_recipe_sets_env_options_in_its_setup_and_they_are_checked(tmp_path) -> None:
    from josh.loop.recipe import LoopRecipe
    from josh.run.components import check_names

    setup = {"env": "tau2-retail", "agent": "replay", "user": "retail_scripted", "env_options": {"judge": "gpt4"}}
    recipe = LoopRecipe.model_validate({"name": "r", "output_dir": str(tmp_path), "setup": setup, "sft": {}})
    with pytest.raises(ValueError, match=r"bad option judge='gpt4' for the tau2-retail environment \(--env-option\)"):
        check_names(ComponentOptions(**recipe.setup.model_dump()))


def test_a_failed_judge_request_is_noted_for_the_conversation_it_scores() -> None:
    def down(messages, tools, index):
        raise LLMError("judge: gave up after 3 attempts: APIConnectionError")

    ask = blocking_chat(ScriptedLLM(down))
    with failures_noted() as noted, pytest.raises(RuntimeError, match="judge request failed"):
        ask([user("Was the reply right?")])
    assert noted == ["judge: gave up after 3 attempts: APIConnectionError"]
