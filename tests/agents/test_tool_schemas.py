"""The tree records the tool schemas the agent's model actually saw, so extracted rows render as at inference."""

from josh.agents import make_agent
from josh.llm.factory import make_llm
from josh.run.components import build_env
from josh.search.algorithm import SearchConfig, search
from josh.users import make_user


async def _tree(strategy: str):
    env = build_env("toolwoz", "mini")
    task = env.tasks("test")[0]
    agent = make_agent(strategy, env, make_llm("scripted", policy=["SPEAK Hello! <COMMAND_END>"]))
    return env, await search(task, env, agent, make_user("agenda"), SearchConfig(max_depth=1, branching=1))


async def test_text_protocol_agents_record_no_tool_schemas():
    for strategy in ("react", "act"):
        _, tree = await _tree(strategy)
        assert tree.tools == [], strategy


async def test_function_calling_and_scripted_agents_record_the_env_tools():
    env, tree = await _tree("function_calling")
    assert tree.tools == env.tools
    task = env.tasks("test")[0]
    oracle = make_agent("oracle", env, None)
    tree = await search(task, env, oracle, make_user("agenda"), SearchConfig(max_depth=1, branching=1))
    assert tree.tools == env.tools
