"""An OpenEnv server as a josh environment: ``--env openenv:URL`` runs josh's evaluation and search on it.

Any OpenEnv server with tools over MCP will do (``client.py`` reads what it offers): the tools are the ones it lists,
a tool call is OpenEnv's standard MCP action. Where the server has a user (``josh env serve``), the agent's words go
to it as a ``message`` step and its reply is the user's; without one, the agent's words end the conversation (nobody
answers them, and no standard action carries them). Where the server lists tasks (OpenEnv's task API with josh task
records), those are the tasks, each started by its id; without one, a task is an episode started by seed: split
``test`` holds seeds ``0 .. episodes-1``, ``train`` the next ``episodes`` (``--env-option episodes=N``, default 20;
``--env-option seeds=[...]`` names them), and the opening is the reset observation's text. A goal the server credits
(``completed_goals``) completes it here. The reward is the server's at ``done``; a conversation that ended first
(josh's bounds, or the agent's words on a server without a user) is scored by its goal share where the task has
goals, else by the sum of the rewards its steps got; the search scores goal-less tasks by that reward
(``outcome_reward``). The state keeps the branch's actions and their answers;
``sessions.py`` says how a branch is rebuilt on the server and what that costs. Every server call is blocking I/O
(``blocking``, and ``user_says_async``, run it on a worker thread, so conversations overlap). A URL that does not
answer is one line (``ValueError``) before any work.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import ValidationError

from josh.core.env import ConversationState, EnvBase
from josh.envs.openenv.client import call_action, get, name_of, opening_text, probe, tool_answer
from josh.envs.openenv.sessions import Action, SessionPool, Step
from josh.types import CallRecord, ErrorCategory, Goal, Message, Task, ToolCall, ToolResult

PREFIX = "openenv:"
EPISODES = 20
"""Episodes per split of a server without a task list (``--env-option episodes``)."""


def is_remote(env: str) -> bool:
    """``env`` names an OpenEnv server (``openenv:URL``)."""
    return env.startswith(PREFIX)


def served_name(env: str) -> str:
    """The name the OpenEnv server of ``env`` (``openenv:URL``) gives itself; one line when it does not answer."""
    return name_of(env.removeprefix(PREFIX).rstrip("/"))


class RemoteState(ConversationState):
    """One branch on the server: the task, its actions and their answers (per branch), the env (shared)."""

    __slots__ = ("remote", "actions", "answers", "final")
    shared_fields: ClassVar[tuple[str, ...]] = ("task", "remote")
    branch_fields: ClassVar[tuple[str, ...]] = ConversationState.branch_fields + ("actions", "answers", "final")
    holds_user: ClassVar[bool] = True  # the run asks user_says_async, not the --user simulator

    def __init__(self, task: Task, remote: RemoteEnv) -> None:
        super().__init__(task)
        self.remote = remote
        self.actions: list[Action] = []
        self.answers: list[Step] = []
        self.final: float | None = None

    def act(self, action: Action) -> Step:
        """The server's answer to ``action`` on this branch; it counts the goals it credits and keeps the end."""
        answer = self.remote.pool.step(self.task.id, self.actions, self.answers, action)
        self.actions.append(action)
        self.answers.append(answer)
        self._note(answer, ended_by_tool=action.get("type") == "call_tool")
        return answer

    def user_says(self, transcript: list[Message]) -> tuple[str, bool]:
        """The server's user answering the agent's last words (nothing said yet: the episode's opening); and whether
        the conversation is over. The user lives on the server (``josh.run.user_turn`` asks this state); a server
        without one ends the conversation at the agent's words."""
        if not transcript:
            answer = self.remote.pool.opening(self.task.id)
            self.remote.openings.setdefault(self.task.id, answer)
            self._note(answer, ended_by_tool=False)
            text = str(answer.get("content", "")) if self.remote.server.has_user else opening_text(answer)
            return text, bool(answer["done"])
        if not self.remote.server.has_user:
            return "", True
        last = transcript[-1]  # the agent's words; a turn that ended without speaking says nothing
        answer = self.act({"message": (last.content or "") if last.role == "assistant" else ""})
        return str(answer.get("content", "")), bool(answer["done"])

    async def user_says_async(self, transcript: list[Message]) -> tuple[str, bool]:
        """``user_says`` on a worker thread (the event loop goes on with other conversations)."""
        return await asyncio.to_thread(self.user_says, transcript)

    @property
    def step_rewards(self) -> float:
        """The sum of the rewards the branch's steps got."""
        return sum(float(a.get("reward") or 0.0) for a in self.answers)

    def _note(self, answer: Step, *, ended_by_tool: bool) -> None:
        """Count the goals ``answer`` credits; at ``done``, keep the reward (a tool that ended it: terminated)."""
        self.completed.update(answer.get("completed_goals") or ())
        if answer["done"]:
            self.final = float(answer["reward"] or 0.0)
            self.terminated = ended_by_tool


class RemoteEnv(EnvBase):
    """The OpenEnv server at ``url`` (see the module docstring); ``sessions``: most server sessions at once;
    ``episodes`` or ``seeds``: the tasks of a server without a task list."""

    outcome_reward = True  # a task without goals (an episode by seed) is searched by the server's reward
    blocking = True  # every call is a server request: josh.core.env.call_tool runs it on a worker thread

    def __init__(self, url: str, sessions: int = 8, episodes: int = EPISODES, seeds: list[int] | None = None) -> None:
        self.url = url.removeprefix(PREFIX).rstrip("/")
        self.server = probe(self.url)
        self.name = self.server.name
        self.tools = self.server.tools
        self.splits = self.server.splits or ("test", "train")
        if self.server.splits is None:
            self.goal_tools = frozenset()  # episodes by seed have no goal calls: the diagnostics count no tool as one
        self.episodes, self.seeds = episodes, seeds
        self._tasks: dict[str, Task] = {}
        self.pool = SessionPool(self.url, self._resets, sessions)
        self.openings: dict[str, Step] = {}
        """Each task's reset answer, the first one asked (it carries the system prompt and the expected failures)."""

    @property
    def replayed(self) -> int:
        """Steps replayed on the server to rebuild branches so far (``sessions.py``)."""
        return self.pool.replayed

    def tasks(self, split: str) -> list[Task]:
        if self.server.splits is not None:
            listed = get(self.url, self.server.task_path, split=split)["tasks"]
            try:
                tasks = [Task.model_validate(t) for t in listed]
            except ValidationError as exc:
                raise ValueError(
                    f"the OpenEnv server {self.url} lists tasks josh cannot read (josh task records: id, env, goals, "
                    f"...): {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
                ) from None
        elif split not in self.splits:
            raise ValueError(f"unknown split {split!r} of the OpenEnv server {self.url}; choose test or train")
        else:
            start = self.splits.index(split) * self.episodes
            seeds = self.seeds if self.seeds is not None else range(start, start + self.episodes)
            tasks = [Task(id=f"seed-{s}", env=self.name, split=split, details={"seed": s}) for s in seeds]
        self._tasks.update((t.id, t) for t in tasks)
        return tasks

    def _resets(self, task_id: str) -> dict[str, Any]:
        """The reset arguments that start task ``task_id``: its id (a task list), else its seed."""
        task = self._tasks.get(task_id)
        if self.server.splits is None and task is not None:
            return {"seed": task.details["seed"]}
        return {"task_id": task_id}

    def system_prompt(self, task: Task) -> str:
        if task.id not in self.openings:
            self.openings[task.id] = self.pool.opening(task.id)
        return str(self.openings[task.id].get("system_prompt") or "")

    def expected_failures(self, task: Task) -> list[Goal]:
        """The expected failures the server's environment sent with ``task``'s opening; none before a conversation
        of it has opened (asking for them resets no session), and none from a server that does not say."""
        opening = self.openings.get(task.id) or {}
        return [Goal.model_validate(g) for g in opening.get("expected_failures") or []]

    def reset(self, task: Task) -> ConversationState:
        self._tasks.setdefault(task.id, task)
        return RemoteState(task, self)

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """The call's action on the server. It overrides ``call``, not ``step``: the server credits goals on the
        user's messages too (``RemoteState._note``), so the goals a call completed are those the state gained."""
        assert isinstance(state, RemoteState)
        before = set(state.completed)
        try:
            answer = state.act(call_action(call.name, call.arguments))
        except Exception as exc:  # the server refused the action (a malformed call): that call's error
            result = ToolResult(content=f"Error: {exc}", error=ErrorCategory.MALFORMED)
        else:
            content, error, data = tool_answer(answer)
            result = ToolResult(
                content=content, error=error, completed_goals=tuple(sorted(state.completed - before)),
                terminal=state.terminated, data=data,
            )  # fmt: skip
        state.log.append(CallRecord(call.name, call.arguments, result.content, result.error, result.completed_goals))
        return result

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        """The server's reward at ``done``; for a conversation that ended first, the goal share where the task has
        goals, else the sum of its steps' rewards."""
        assert isinstance(state, RemoteState)
        if state.final is not None:
            return state.final
        return state.goal_reward if state.task.goals else state.step_rewards
