"""The environment contract (``josh.core.env``): an environment says what a call did once, in the ``ToolResult`` its
``step`` returns, and ``EnvBase.call`` derives the completed goals, the log and the end from it; the hooks generic
code calls (``blocking``, ``holds_user`` / ``user_says``) have defaults every environment and state inherits."""

from __future__ import annotations

import asyncio
import threading

import pytest

from josh.core.env import ConversationState, EnvBase, call_tool, missing_members, record
from josh.envs.agreement import disagreement
from josh.envs.checker import check_env
from josh.run.user_turn import user_turn
from josh.types import CallRecord, ErrorCategory, Goal, Task, ToolCall, ToolResult, user
from josh.users.scripted import ScriptedUser

TASK = Task(
    id="t", env="stamps", goals=[Goal(name="stamp", parameters={"n": 1}), Goal(name="stamp", parameters={"n": 2})]
)


class StampEnv(EnvBase):
    """``stamp(n)`` meets the goals with that ``n`` (also those met before: ``record`` drops them); ``close`` ends."""

    name = "stamps"
    tools: list[dict] = []

    def step(self, state: ConversationState, call: ToolCall) -> ToolResult:
        if call.name == "close":
            return ToolResult("closed", terminal=True)
        met = tuple(i for i, g in enumerate(state.task.goals) if g.parameters == call.arguments)
        return ToolResult(f"stamped {len(met)}", completed_goals=met)


def test_call_derives_the_completed_goals_the_log_and_the_end_from_the_result() -> None:
    env, state = StampEnv(), ConversationState(TASK)
    first = env.call(state, ToolCall(name="stamp", arguments={"n": 2}))
    again = env.call(state, ToolCall(name="stamp", arguments={"n": 2}))  # goal 1 is met already: not again
    assert (first.completed_goals, again.completed_goals, state.completed) == ((1,), (), {1})
    assert state.log == [
        CallRecord("stamp", {"n": 2}, "stamped 1", None, (1,)),
        CallRecord("stamp", {"n": 2}, "stamped 1", None, ()),
    ]
    assert not state.terminated and env.call(state, ToolCall(name="close")).terminal and state.terminated
    assert state.goal_reward == 0.5


def test_record_keeps_a_name_or_arguments_of_an_unexpected_type_as_their_repr() -> None:
    state = ConversationState(TASK)
    record(state, ToolCall.model_construct(name=None, arguments=[1]), ToolResult("Error", ErrorCategory.MALFORMED))
    assert state.log == [CallRecord("None", "[1]", "Error", ErrorCategory.MALFORMED, ())]


def test_an_environment_without_step_or_call_lacks_step() -> None:
    class Empty(EnvBase):
        name, tools = "empty", []

    assert missing_members(Empty()) == ["system_prompt", "reset", "reward", "tasks", "step"]
    assert "step" not in missing_members(StampEnv())
    with pytest.raises(NotImplementedError, match="Empty implements neither step"):
        Empty().call(ConversationState(TASK), ToolCall(name="x"))


def test_a_blocking_environment_is_called_on_a_worker_thread() -> None:
    threads: list[str] = []

    class Remote(StampEnv):
        def step(self, state: ConversationState, call: ToolCall) -> ToolResult:
            threads.append(threading.current_thread().name)
            return super().step(state, call)

    async def both() -> None:
        for blocking in (False, True):
            env = Remote()
            env.blocking = blocking
            await call_tool(env, ConversationState(TASK), ToolCall(name="stamp", arguments={"n": 1}))

    asyncio.run(both())
    assert threads[0] == "MainThread" and threads[1] != "MainThread"


def test_a_state_holds_no_user_unless_it_says_so() -> None:
    state = ConversationState(TASK)
    assert state.holds_user is False
    with pytest.raises(NotImplementedError, match="ConversationState holds no user"):
        asyncio.run(state.user_says_async([]))


def test_a_state_that_holds_the_user_answers_for_it() -> None:
    class Desk(ConversationState):
        __slots__ = ()
        holds_user = True

        def user_says(self, transcript: list) -> tuple[str, bool]:
            return f"heard {len(transcript)}", len(transcript) > 1

    answer = asyncio.run(user_turn(StampEnv(), Desk(TASK), ScriptedUser(utterances=["never said"]), TASK, [user("a")]))
    assert (answer.said.text, answer.said.done) == ("heard 1", False)


class Forgetful(StampEnv):
    """States the outcome twice, the old way, and forgets the goals in the log: what the checker is for."""

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        result = self.step(state, call)
        state.completed.update(result.completed_goals)
        state.log.append(CallRecord(call.name, call.arguments, result.content, result.error))
        return result


class Stamps(StampEnv):
    """``StampEnv`` with what ``check_env`` needs: a tool schema, a split, a reset and a reward."""

    tools = [{"type": "function", "function": {"name": "stamp", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]  # fmt: skip

    def system_prompt(self, task: Task) -> str:
        return "Stamp."

    def tasks(self, split: str) -> list[Task]:
        return [TASK]

    def reset(self, task: Task) -> ConversationState:
        return ConversationState(task)

    def reward(self, state: ConversationState, messages: list) -> float:
        return state.goal_reward


class ForgetfulStamps(Forgetful, Stamps):
    pass


def test_the_checker_passes_a_derived_environment_and_names_a_disagreement() -> None:
    report = check_env(Stamps())
    agree = next(c for c in report.checks if c.name == "reports agree")
    assert report.passed and agree.detail.endswith("calls: result, log and completed goals agree")
    report = check_env(ForgetfulStamps(), raise_on_failure=False)
    [failed] = [c for c in report.checks if not c.passed]
    assert failed.name == "reports agree"
    assert failed.detail.startswith("task 't', stamp({'n': 1}): the log entry's completed_goals is (), the call's ")
    assert "result says (0,) (implement step(state, call) and let EnvBase.call record the result)" in failed.detail


def _no_log(state: ConversationState, call: ToolCall, result: ToolResult) -> None:
    state.completed.update(result.completed_goals)


def _no_goals(state: ConversationState, call: ToolCall, result: ToolResult) -> None:
    state.log.append(CallRecord(call.name, call.arguments, result.content, result.error, result.completed_goals))


def _no_end(state: ConversationState, call: ToolCall, result: ToolResult) -> None:
    record(state, call, ToolResult(result.content, result.error, result.completed_goals))


@pytest.mark.parametrize(
    ("result", "noted", "problem"),
    [
        (ToolResult("ok", completed_goals=(0,)), _no_log, "the call added 0 entries to state.log, not one"),
        (ToolResult("ok", completed_goals=(0,)), _no_goals, "completed_goals says [0], but state.completed gained []"),
        (ToolResult("bye", terminal=True), _no_end, "the result is terminal but state.terminated is False"),
        (ToolResult("ok", completed_goals=(7,)), record, "completed_goals names [7], not goals of the task (it has 2)"),
        (ToolResult("ok", completed_goals=(1,)), record, None),
    ],
)
def test_disagreement_names_what_disagrees(result: ToolResult, noted, problem: str | None) -> None:
    state, call = ConversationState(TASK), ToolCall(name="stamp", arguments={"n": 2})
    noted(state, call, result)
    assert disagreement(state, call, result, set(), 0) == problem
