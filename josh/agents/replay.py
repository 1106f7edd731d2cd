"""An agent that replays a fixed list of tool calls (e.g. a task's gold actions), for tests, demos and baselines.

It works with any ``Env``: each call is one generation step on a fork of the state, and the turn ends with a short
spoken reply. Where it is in the list is read from the history (the tool calls it already made), so the agent
keeps no per-conversation state and can be forked freely.
"""

from __future__ import annotations

from collections.abc import Sequence

from josh.agents import register_agent
from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState, Env, call_tool
from josh.registry import options_of
from josh.types import Message, Task, ToolCall, assistant, tool_result

DONE_REPLY = "I have completed everything you asked for."


def gold_calls(task: Task) -> list[ToolCall]:
    """The task's gold calls: ``details["actions"]`` (retail: ``{name, kwargs}``), else the goal calls."""
    actions = task.details.get("actions")
    if isinstance(actions, list):
        return [
            ToolCall(name=str(a.get("name", "")), arguments=dict(a.get("kwargs") or {}), id=f"gold_{i}")
            for i, a in enumerate(actions)
            if isinstance(a, dict)
        ]
    return [ToolCall(name=g.name, arguments=dict(g.parameters), id=f"gold_{i}") for i, g in enumerate(task.goals)]


def final_reply(task: Task) -> str:
    """A closing line that also states the task's required outputs (retail ``details["outputs"]``), if any."""
    outputs = [str(o) for o in task.details.get("outputs") or []]
    return DONE_REPLY + (" Here is what you asked about: " + "; ".join(outputs) + "." if outputs else "")


class ReplayAgent:
    """Makes ``calls`` one per generation step, ``calls_per_turn`` per agent turn (all by default), then speaks.

    Without ``calls`` it replays each task's own gold calls and closes with the task's required outputs.

    Between batches it asks the user to confirm the next call; after the last one it says ``reply``. A call that
    ends the conversation (a transfer) ends the turn without a reply.
    """

    def __init__(
        self,
        env: Env,
        calls: Sequence[ToolCall] | None = None,
        *,
        reply: str | None = None,
        calls_per_turn: int | None = None,
    ) -> None:
        if calls_per_turn is not None and calls_per_turn < 1:
            raise ValueError(f"calls_per_turn must be at least 1, got {calls_per_turn}")
        self.env = env
        self.calls = None if calls is None else list(calls)
        self.reply = reply
        self.calls_per_turn = calls_per_turn

    @classmethod
    def for_task(cls, env: Env, task: Task, *, calls_per_turn: int | None = None) -> ReplayAgent:
        """Replay the task's gold calls and close with its required outputs."""
        return cls(env, gold_calls(task), reply=final_reply(task), calls_per_turn=calls_per_turn)

    def frame(self, task: Task) -> PromptFrame:
        """No prompt: the model-free agent is framed by the environment's tools only."""
        return PromptFrame(tools=list(self.env.tools))

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        return [await self._turn(history, state) for _ in range(n)]

    def _script(self, task: Task) -> tuple[list[ToolCall], str]:
        if self.calls is None:
            return gold_calls(task), self.reply or final_reply(task)
        return self.calls, self.reply or DONE_REPLY

    async def _turn(self, history: list[Message], state: ConversationState) -> AgentTurn:
        calls, reply = self._script(state.task)
        made = sum(len(m.tool_calls or ()) for m in history if m.role == "assistant")
        stop = len(calls) if self.calls_per_turn is None else made + self.calls_per_turn
        branch = state.fork()
        out = AgentTurn(state=branch)
        for call in calls[made:stop]:
            if branch.terminated:
                break
            result = await call_tool(self.env, branch, call)
            out.messages += [assistant(calls=[call]), tool_result(call.id, result.content)]
            out.completed_goals += list(result.completed_goals)
            if result.error is not None:
                out.errors.append(result.error)
        if branch.terminated:
            return out
        left = calls[min(stop, len(calls)) :]
        out.reply = f"Next I will call {left[0].name}. Do you confirm (yes/no)?" if left else reply
        out.messages.append(assistant(out.reply))
        return out


register_agent(
    "replay",
    lambda env, llm, **options: ReplayAgent(env, **options),
    options=options_of(ReplayAgent, skip=1),
    summary="replays fixed tool calls (default: the task's gold calls)",
)
