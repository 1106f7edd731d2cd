"""Prompting modes of the prompted agents: worked examples as earlier chat turns, and constrained decoding."""

import pytest

from josh.agents import make_agent
from josh.agents.prompting import examples
from josh.core.llm import Completion, Sampling
from josh.harvest.extract import ExtractConfig, ExtractStats, extract_rows
from josh.search.algorithm import SearchConfig, search
from josh.users import make_user


class RecordingLLM:
    """Answers every request with the first worked example's call, then its reply, and records the requests."""

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.requests = []

    async def chat(self, messages, *, tools=None, n=1, sampling=None):
        self.requests.append((list(messages), sampling))
        text = self.outputs[(len(self.requests) - 1) % len(self.outputs)]
        return [Completion(text=text, completion_tokens=5) for _ in range(n)]


CALL = 'Action: {"name": "search_hotel", "arguments": {"area": "north"}}'
REPLY = 'Action: {"name": "respond", "arguments": {"content": "Found one."}}'


@pytest.mark.parametrize("protocol", ["act", "react", "function_calling"])
def test_examples_as_turns_read_back_in_the_agents_protocol(mini_env, protocol):
    agent = make_agent(protocol, mini_env, RecordingLLM([REPLY]), examples=2, examples_as_turns=True)
    turns = agent.preamble()
    assert "Examples:" not in agent.system_prompt(mini_env.tasks("test")[0])
    chosen = examples("toolwoz")[:2]
    assert [m.role for m in turns if m.role == "user"][:1] == ["user"]
    assert turns[0].content == chosen[0].user
    again = agent.protocol.example_turns(chosen)
    assert [(m.role, m.content) for m in turns] == [(m.role, m.content) for m in again]
    spoken = [m for m in turns if m.role == "assistant"]
    assert any(chosen[0].reply in (m.content or "") for m in spoken)


def test_examples_in_the_system_prompt_by_default(mini_env):
    agent = make_agent("act", mini_env, RecordingLLM([REPLY]), examples=2)
    assert agent.preamble() == []
    assert "Examples:" in agent.system_prompt(mini_env.tasks("test")[0])


async def test_requests_carry_the_preamble_and_the_grammar(mini_env):
    llm = RecordingLLM([CALL, REPLY])
    agent = make_agent(
        "act", mini_env, llm, examples=1, examples_as_turns=True, constrain=True, sampling=Sampling(seed=1)
    )
    task = mini_env.tasks("test")[0]
    from josh.types import user

    (turn,) = await agent.turn([user("a hotel in the north")], mini_env.reset(task))
    assert turn.reply == "Found one."
    messages, sampling = llm.requests[0]
    assert messages[1:-1] == agent.preamble()
    assert sampling.grammar and '"search_hotel"' in sampling.grammar and sampling.seed == 1


def test_constrain_needs_a_protocol_grammar(mini_env):
    with pytest.raises(ValueError, match="no output grammar"):
        make_agent("function_calling", mini_env, RecordingLLM([REPLY]), constrain=True)


async def test_trees_and_sft_rows_hold_the_preamble(mini_env):
    agent = make_agent("act", mini_env, RecordingLLM([CALL, REPLY]), examples=1, examples_as_turns=True)
    task = mini_env.tasks("train")[0]
    tree = await search(task, mini_env, agent, make_user("agenda"), SearchConfig(max_beam=2, branching=1, max_depth=1))
    assert tree.preamble == agent.preamble() and tree.system == agent.system_prompt(task) and tree.protocol == "act"
    for node in tree.nodes:
        node.ideal = node.depth <= 1
    tree.reward = 1.0
    rows = extract_rows([tree], ExtractConfig(min_reward=0.0, drop_errors=[]), ExtractStats())
    first = rows.sft[0]["messages"]
    assert first[0]["role"] == "system"
    assert [m["content"] for m in first[1 : 1 + len(tree.preamble)]] == [m.content for m in tree.preamble]


def test_eval_takes_agent_options_from_the_cli(tmp_path):
    from typer.testing import CliRunner

    from josh.cli.main import app

    reply = 'Action: {"name": "respond", "arguments": {"content": "hi"}}'
    base = ["eval", "--agent", "act", "--backend", "scripted", "--model", "x", "--llm-option", f"replies=['{reply}']"]
    base += ["--limit", "1", "--no-progress"]
    ok = CliRunner().invoke(app, [*base, "--agent-option", "constrain=true", "--out", str(tmp_path / "a")])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(app, [*base, "--agent-option", "bogus=1", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "unknown option bogus for the act agent" in bad.output


@pytest.mark.parametrize("protocol", ["act", "react"])
def test_tool_listing_modes_shorten_the_prompt_and_keep_the_tools_vocabulary(mini_env, protocol):
    task = mini_env.tasks("test")[0]
    prompts = {
        mode: make_agent(protocol, mini_env, RecordingLLM([REPLY]), examples=0, tool_listing=mode).system_prompt(task)
        for mode in ("full", "brief", "none")
    }
    assert len(prompts["none"]) < len(prompts["brief"]) < len(prompts["full"])
    hotel = next(t.get("function", t) for t in mini_env.tools if t.get("function", t)["name"] == "search_hotel")
    keys = list(hotel["parameters"]["properties"])
    assert f"search_hotel({', '.join(keys)})" in prompts["brief"].splitlines()
    assert "guesthouse" in prompts["full"] and "guesthouse" not in prompts["brief"]
    assert hotel["description"].splitlines()[0] in prompts["full"] and hotel["description"] not in prompts["brief"]
    assert "search_hotel" not in prompts["none"] and "Tools (" not in prompts["none"]
    domain = mini_env.system_prompt(task).strip()
    assert all(domain in text for text in prompts.values())


def test_tool_listing_is_refused_where_the_backend_gets_the_tools(mini_env):
    with pytest.raises(ValueError, match="drop the tool_listing option"):
        make_agent("function_calling", mini_env, RecordingLLM([REPLY]), tool_listing="brief")
    assert make_agent("function_calling", mini_env, RecordingLLM([REPLY]), tool_listing="full").llm_tools


def test_a_bad_tool_listing_is_a_clear_cli_error(tmp_path):
    from typer.testing import CliRunner

    from josh.cli.main import app

    reply = 'Action: {"name": "respond", "arguments": {"content": "hi"}}'
    base = ["eval", "--agent", "act", "--backend", "scripted", "--model", "x", "--llm-option", f"replies=['{reply}']"]
    base += ["--limit", "1", "--no-progress", "--out", str(tmp_path / "a")]
    bad = CliRunner().invoke(app, [*base, "--agent-option", "tool_listing=short"])
    assert bad.exit_code == 2 and "bad option tool_listing='short'" in bad.output
    assert not (tmp_path / "a").exists()
