"""End to end on the mini ToolWOZ set with SmolLM2: rollout, then extraction (slow: loads the model)."""

from __future__ import annotations

import json

import pytest

from josh.core.llm import Sampling
from josh.harvest.extract import ExtractConfig, extract
from josh.run.components import build_env
from josh.search.algorithm import SearchConfig
from josh.search.rollout import TREES_FILE, RolloutConfig, run_rollouts
from josh.search.tree import Tree


@pytest.mark.slow
async def test_smollm2_rollout_on_mini_then_extract(tmp_path) -> None:
    from josh.agents import make_agent
    from josh.llm.factory import make_llm
    from josh.users import make_user

    env = build_env("toolwoz", "mini")
    task = env.tasks("train")[0]
    llm = make_llm("hf", "smollm2")
    agent = make_agent("react", env, llm, sampling=Sampling(max_new_tokens=12), max_generations=1)
    user = make_user("goal", llm, sampling=Sampling(temperature=0.0, max_new_tokens=16))
    config = RolloutConfig(search=SearchConfig(max_beam=2, branching=2, max_depth=1), concurrency=1)
    stats = await run_rollouts([task], env, agent, user, tmp_path, config, progress=False)
    assert stats.tasks == 1 and stats.llm_calls >= 2
    tree = Tree.model_validate_json((tmp_path / TREES_FILE).read_text().splitlines()[0])
    # ReACT describes the tools inside its system prompt and passes no schemas to the model, so the tree has none
    assert tree.task_id == task.id and "search_restaurant" in tree.system and tree.tools == [] and tree.error is None
    assert [n.depth for n in tree.nodes] == [0, 1, 1] and tree.nodes[0].user
    assert all(n.messages and n.messages[0].role == "assistant" for n in tree.nodes[1:])
    out = extract(tmp_path, tmp_path / "data", ExtractConfig(min_reward=0.0, drop_errors=[]))
    assert json.loads((tmp_path / "data" / "extract_stats.json").read_text())["trees"] == 1 == out.trees
