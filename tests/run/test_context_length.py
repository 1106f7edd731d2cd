"""A prompt longer than its model's context ends the conversation or the search branch with its own ending, a result
scored like any other: never a failed piece, never toward a backend being down, never redone on rerun (issue 66)."""

from __future__ import annotations

from typing import get_args

from josh.agents import make_agent
from josh.agents.react import ReactProtocol
from josh.core.llm import ContextLengthError
from josh.eval.evaluate import evaluate, load_results
from josh.llm.health import FailurePolicy, stop_if_failing
from josh.llm.scripted import ScriptedLLM
from josh.run.conversation import EndReason, run_conversation
from josh.run.env_judge import attach_judge, blocking_chat, judge_overflows
from josh.search.algorithm import SearchConfig
from josh.search.rollout import search_task, summarize
from josh.types import ErrorCategory, ToolCall, user
from josh.users.goal import GoalUser
from tests.fakes.conversation import CallingAgent, CountingUser, FakeEnv, ToyEnv, make_tasks

REACT = ReactProtocol()
STRICT = FailurePolicy(max_consecutive=2, window=4, max_share=0.25)  # two failures in a row would stop a run


def overflow(what: str = "prompt") -> ContextLengthError:
    return ContextLengthError(f"{what} has 2311 tokens, over the limit of 2048")


def agent_llm(*script: str | None) -> ScriptedLLM:
    """The agent's backend, answering calls in the order of ``script`` (cycled): ``find`` / ``book`` (ReAct calls),
    ``reply`` (a spoken reply), ``None`` (the prompt is too long)."""
    step = iter(range(10**6))

    def policy(messages, tools, index):
        move = script[next(step) % len(script)]
        if move is None:
            raise overflow()
        if move == "reply":
            return REACT.reply_text("Done. Anything else?")
        return REACT.call_texts([ToolCall(name=move, arguments={})])[0]

    return ScriptedLLM(policy)


def goal_user(*script: str | None) -> GoalUser:
    """An LLM user answering in the order of ``script``; ``None``: its prompt is too long."""
    step = iter(range(10**6))

    def policy(messages, tools, index):
        said = script[next(step) % len(script)]
        if said is None:
            raise overflow("the user's prompt")
        return said

    return GoalUser(ScriptedLLM(policy))


async def test_the_agents_prompt_over_the_context_ends_the_conversation_scored_on_the_state_reached():
    llm = agent_llm("find", "reply", None)
    env = ToyEnv()
    task = make_tasks(1, goals=2)[0]
    record = await run_conversation(env, task, make_agent("react", env, llm), CountingUser(5))
    assert record.end_reason == "context_length" and record.failed is None
    assert record.error == "agent: prompt has 2311 tokens, over the limit of 2048"
    assert (record.turns, record.reward, record.completed_goals) == (1, 0.5, [0])
    assert ErrorCategory.LLM_ERROR not in record.errors
    assert (llm.usage.errors, llm.usage.overflows) == (0, 1)


async def test_tool_results_that_outgrow_the_context_mid_turn_end_the_conversation_after_that_turn():
    llm = agent_llm("find", None)
    env = ToyEnv()
    record = await run_conversation(env, make_tasks(1, goals=2)[0], make_agent("react", env, llm), CountingUser(5))
    assert record.end_reason == "context_length" and record.failed is None and record.turns == 1
    assert record.calls == 1 and record.reward == 0.5, "the turn's call before the overflow counts"
    assert record.error.startswith("agent: prompt has 2311 tokens")


async def test_the_users_prompt_over_its_context_is_its_own_ending_not_a_user_error():
    task = make_tasks(1, goals=3)[0]
    task.user_goal = "Three things."
    record = await run_conversation(FakeEnv(), task, CallingAgent(), goal_user("Please do it.", None))
    assert record.end_reason == "user_context_length" and record.failed is None
    assert record.errors == [] and record.turns == 1 and record.completed_goals == [0]
    assert record.error == "user simulator: the user's prompt has 2311 tokens, over the limit of 2048"


class JudgedEnv(ToyEnv):
    """Scores with its judge, as τ²'s NL assertions do: a judge that fails scores 0.0."""

    def reward(self, state, messages):
        try:
            verdict = self.judge_call([user("Did the agent do right?")])
        except RuntimeError:
            return 0.0
        return state.goal_reward if verdict == "yes" else 0.0


async def test_the_judges_prompt_over_its_context_is_the_judges_own_ending():
    env = JudgedEnv()
    attach_judge(env, agent_llm(None))
    llm = agent_llm("find", "reply")
    record = await run_conversation(env, make_tasks(1, goals=2)[0], make_agent("react", env, llm), CountingUser(1))
    assert record.end_reason == "judge_context_length" and record.failed is None
    assert record.reward == 0.0 and record.completed_goals == [0]
    assert record.error.startswith("judge: prompt has 2311 tokens")


def test_the_blocking_judge_notes_an_overflow_for_the_conversation_it_scores():
    ask = blocking_chat(agent_llm(None))
    with judge_overflows() as overflowed:
        try:
            ask([user("judge this")])
        except RuntimeError as exc:
            assert "judge prompt too long" in str(exc)
    assert overflowed == ["prompt has 2311 tokens, over the limit of 2048"]


async def test_eval_records_every_overflow_as_finished_the_backend_never_down_and_a_rerun_runs_nothing(tmp_path):
    llm = agent_llm("find", "reply", None)  # each conversation: one turn, then a prompt too long
    env, tasks = ToyEnv(), make_tasks(4, goals=2)
    agent = make_agent("react", env, llm)
    summary = await evaluate(
        env, tasks, agent, CountingUser(5), tmp_path, concurrency=1, guard=lambda: stop_if_failing([llm], STRICT)
    )
    assert summary.end_reasons == {"context_length": 4} and summary.failed == 0 and summary.pending == 0
    assert summary.average_reward.mean == 0.5
    assert (llm.usage.errors, llm.usage.overflows) == (0, 4)
    stop_if_failing([llm], STRICT, ended=True)
    sent, lines = len(llm.requests), (tmp_path / "results.jsonl").read_text()
    again = await evaluate(env, tasks, agent, CountingUser(5), tmp_path, concurrency=1)
    assert len(llm.requests) == sent and (tmp_path / "results.jsonl").read_text() == lines
    assert again.end_reasons == {"context_length": 4}
    assert [r.end_reason for r in load_results(tmp_path)] == ["context_length"] * 4


class OverflowingAgent(CallingAgent):
    """``CallingAgent`` until the conversation holds ``after`` messages; then its prompt is too long: raised, or (with
    ``mid_turn``) the turn's tool results outgrew it after its call."""

    def __init__(self, after: int, mid_turn: bool = False) -> None:
        super().__init__()
        self.after, self.mid_turn = after, mid_turn

    async def turn(self, history, state, *, n=1):
        if len(history) < self.after:
            return await super().turn(history, state, n=n)
        if not self.mid_turn:
            raise overflow()
        turns = await super().turn(history, state, n=n)
        for turn in turns:
            turn.messages, turn.reply, turn.overflow = turn.messages[:2], None, str(overflow())
        return turns


async def test_the_search_ends_the_branch_the_agent_cannot_answer_and_records_its_ending(tmp_path):
    task = make_tasks(1, goals=3)[0]
    config = SearchConfig(branching=2, max_beam=4, max_depth=5)
    tree = await search_task(task, FakeEnv(), OverflowingAgent(after=4), CountingUser(5), config)
    assert tree.failed is None and tree.reward == 1 / 3
    [ended] = [n for n in tree.nodes if n.ending]
    assert ended.ending == "context_length" and ended.ended and not ended.dead and ended.depth == 1
    assert ended.exception == "agent: prompt has 2311 tokens, over the limit of 2048"
    assert tree.stats.overflows == 1 and tree.stats.errors == 0
    (tmp_path / "trees.jsonl").write_text(tree.model_dump_json() + "\n")
    stats = summarize(tmp_path / "trees.jsonl")
    assert stats.endings == {"context_length": 1} and stats.failed == 0 and stats.tasks == 1


async def test_a_turn_cut_short_by_its_tool_results_ends_its_branches_in_the_search():
    task = make_tasks(1, goals=3)[0]
    config = SearchConfig(branching=2, max_beam=4, max_depth=5)
    tree = await search_task(task, FakeEnv(), OverflowingAgent(after=4, mid_turn=True), CountingUser(5), config)
    ended = [n for n in tree.nodes if n.ending]
    assert len(ended) == 2 and all(n.ending == "context_length" and n.ended and n.depth == 2 for n in ended)
    assert all(n.messages and n.reply is None and n.goals == [1] for n in ended), "the calls before it count"
    assert tree.failed is None and tree.reward == 2 / 3


async def test_the_search_ends_the_branch_whose_user_prompt_overflowed():
    task = make_tasks(1, goals=3)[0]
    task.user_goal = "Three things."
    tree = await search_task(task, FakeEnv(), CallingAgent(), goal_user("Go on.", None), SearchConfig(branching=1))
    [ended] = [n for n in tree.nodes if n.ending]
    assert ended.ending == "user_context_length" and ended.ended and not ended.dead and ended.errors == []
    assert tree.failed is None and tree.reward == 1 / 3


def test_every_ending_has_a_tau2_termination_reason():
    from josh.envs.tau2.trajectory import TERMINATION

    assert set(TERMINATION) == set(get_args(EndReason))
