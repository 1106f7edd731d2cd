"""A josh environment as an OpenEnv server (``josh env serve``), built with OpenEnv's own ``Environment`` class and
HTTP/WebSocket app (``openenv.core.env_server``); the user simulator lives inside the environment.

``reset`` starts a task (``task_id``; else ``index`` in ``split``; else one drawn from ``split`` by ``seed``; else
the split's first) and answers with the user's opening message. ``step`` takes one action, a tool call
(``tool_name`` and ``arguments``, also as OpenEnv's standard MCP ``call_tool`` action) or a message to the user
(``message``), and answers with the tool's result or the user's reply. A step's reward is its goal credit (the
share of the task's goals it completed); the step that ends the episode (the user is done or failed, a tool ended it,
``max_turns`` messages) carries the final reward instead. The tools are listed, and callable, over MCP (a call there
is a step without its reward). Bad input (an unknown task, a malformed action, a step after ``done``) raises inside
``reset`` or ``step``, which OpenEnv answers with an error response; the server goes on.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from fastapi import FastAPI
from fastmcp import FastMCP
from fastmcp.tools.function_tool import FunctionTool
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from josh.core.env import ConversationState, Env
from josh.envs import build_env
from josh.run.components import build_llms, check_llms
from josh.run.step import USER_CONTEXT_LENGTH
from josh.run.user_turn import user_turn
from josh.types import Message, Task, ToolCall, assistant, tool_result, user
from josh.users import USERS, UserSimulator, make_user
from josh.version import __version__

T = TypeVar("T")


class JoshAction(Action):
    """One agent action: a tool call (``tool_name``, ``arguments``; OpenEnv's standard MCP action, with ``type``
    ``call_tool``, is one too) or a message to the user (``message``)."""

    type: Literal["call_tool"] | None = Field(None, description="call_tool: OpenEnv's MCP tool call (optional)")
    tool_name: str | None = Field(None, description="the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool call's arguments")
    message: str | None = Field(None, description="what the agent says to the user")

    @model_validator(mode="after")
    def _one_kind(self) -> JoshAction:
        if (self.tool_name is None) == (self.message is None) or self.type and self.tool_name is None:
            # a PydanticCustomError, not a ValueError: OpenEnv sends the validation errors as JSON, and a ValueError
            # object in them is not serializable
            raise PydanticCustomError(
                "josh_action", "an action is a tool call (tool_name, arguments) or a message to the user, not both"
            )
        return self


class JoshObservation(Observation):
    """The user's words (``role`` user: after reset or a message) or a tool's result (``role`` tool)."""

    role: Literal["user", "tool"] = "user"
    content: str = ""
    tool_name: str | None = None
    error: str | None = Field(None, description="the tool call's error category (josh.types.ErrorCategory)")
    data: Any = Field(None, description="the tool's structured result, where it has one (ToolWOZ: the row found)")
    task_id: str = ""
    goal_reward: float = Field(0.0, description="the share of the task's goals completed so far")
    completed_goals: list[int] = Field(default_factory=list)
    end_reason: str | None = Field(None, description="why the episode ended (with done)")
    system_prompt: str | None = Field(None, description="the agent's system prompt (reset only)")
    expected_failures: list[dict[str, Any]] | None = Field(
        None, description="the calls the task says fail by design, as goal records (reset only; the diagnostics)"
    )
    task: dict[str, Any] | None = Field(
        None, description="the task record, goals included (reset only): for scripted agents and scoring, never for "
        "the policy being trained",
    )  # fmt: skip


class JoshState(State):
    """The episode's task and how far it went."""

    task_id: str = ""
    turns: int = 0
    done: bool = False
    goal_reward: float = 0.0


@dataclass
class Served:
    """What every session shares: the environment, the user simulator, the turn bound and the event loop (on its own
    thread) that runs the user's coroutines, so an LLM user's backend keeps one loop."""

    name: str
    env: Env
    user: UserSimulator
    max_turns: int = 15
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _splits: dict[str, list[Task]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        threading.Thread(target=self.loop.run_forever, name="josh-openenv-user", daemon=True).start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def tasks(self, split: str) -> list[Task]:
        if split not in self.env.splits:
            raise ValueError(f"unknown split {split!r} of {self.name}; choose one of {', '.join(self.env.splits)}")
        if split not in self._splits:
            self._splits[split] = self.env.tasks(split)
        return self._splits[split]

    def task(self, task_id: str | None, split: str | None, index: int | None, seed: int | None) -> Task:
        """The task ``reset`` asked for (see the module docstring); ``ValueError`` naming the valid choices."""
        splits = [split] if split else list(self.env.splits)
        if task_id is not None:
            for name in splits:
                for task in self.tasks(name):
                    if task.id == task_id:
                        return task
            raise ValueError(f"unknown task {task_id!r} in {self.name} (split {', '.join(splits)})")
        tasks = self.tasks(splits[0] if split else _default_split(self.env))
        if index is not None:
            if not 0 <= index < len(tasks):
                raise ValueError(f"task index {index} out of range: the split has {len(tasks)} tasks")
            return tasks[index]
        return random.Random(seed).choice(tasks) if seed is not None else tasks[0]


def _default_split(env: Env) -> str:
    return "test" if "test" in env.splits else env.splits[0]


@dataclass
class Episode:
    """One task under way: the state, the agent's history, the user's transcript and the turns so far."""

    task: Task
    state: ConversationState
    history: list[Message] = field(default_factory=list)
    transcript: list[Message] = field(default_factory=list)
    turns: int = 0
    end: str | None = None
    reward: float = 0.0


class JoshEnvironment(Environment[JoshAction, JoshObservation, JoshState]):
    """One session of a served josh environment (see the module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: Served) -> None:
        super().__init__()
        self.served = served
        self.episode: Episode | None = None
        self.steps = 0
        self.mcp_server = _tool_server(served.env.tools, self._mcp_call)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
    ) -> JoshObservation:
        task = self.served.task(task_id, split, index, seed)
        env = self.served.env
        self.episode = episode = Episode(task, env.reset(task))
        self.steps = 0
        observation = self._user_answers(episode)
        return observation.model_copy(
            update={
                "system_prompt": env.system_prompt(task),
                "expected_failures": [g.model_dump(mode="json") for g in env.expected_failures(task)],
                "task": task.model_dump(mode="json"),
            }
        )

    def step(self, action: JoshAction, timeout_s: float | None = None, **kwargs: Any) -> JoshObservation:
        episode = self._open_episode()
        self.steps += 1
        if action.message is None:
            return self._call(episode, ToolCall(name=action.tool_name or "", arguments=action.arguments))
        episode.history.append(assistant(action.message))
        episode.transcript.append(assistant(action.message))
        episode.turns += 1
        return self._user_answers(episode)

    @property
    def state(self) -> JoshState:
        episode = self.episode
        if episode is None:
            return JoshState(step_count=self.steps)
        return JoshState(
            step_count=self.steps, task_id=episode.task.id, turns=episode.turns, done=episode.end is not None,
            goal_reward=episode.state.goal_reward,
        )  # fmt: skip

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=self.served.name, version=__version__,
            description=f"josh's {self.served.name} environment with its user simulator inside (josh env serve)",
        )  # fmt: skip

    # OpenEnv's task API (``/{env_name}/splits``, ``/tasks``, ``/task``): the tasks by split and index.
    def list_splits(self) -> list[str]:
        return list(self.served.env.splits)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """The split's task records, goals included (josh's ``--env openenv:URL`` reads them)."""
        return [t.model_dump(mode="json") for t in self.served.tasks(split)]

    def num_tasks(self, split: str) -> int:
        return len(self.served.tasks(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self.served.tasks(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"task index {index} out of range: {split} has {len(tasks)} tasks")
        return tasks[index].model_dump(mode="json")

    def _open_episode(self) -> Episode:
        if self.episode is None:
            raise RuntimeError("no episode: reset first")
        if self.episode.end is not None:
            raise RuntimeError(f"the episode is over ({self.episode.end}): reset to start another")
        return self.episode

    def _call(self, episode: Episode, call: ToolCall) -> JoshObservation:
        env, state = self.served.env, episode.state
        before = state.goal_reward
        result = env.call(state, call)
        episode.history += [assistant(calls=[call]), tool_result(call.id, result.content)]
        if state.terminated:
            self._finish(episode, "terminated")
        return self._observe(
            episode, "tool", result.content, state.goal_reward - before, tool_name=call.name,
            error=result.error.value if result.error else None, data=_jsonable(result.data),
        )  # fmt: skip

    def _user_answers(self, episode: Episode) -> JoshObservation:
        before = episode.state.goal_reward
        answer = self.served.run(
            user_turn(self.served.env, episode.state, self.served.user, episode.task, episode.transcript)
        )
        episode.transcript.extend(answer.messages)
        if answer.said.text:
            episode.history.append(user(answer.said.text))
        if answer.failure:
            self._finish(episode, "user_error")
        elif answer.overflow:
            self._finish(episode, USER_CONTEXT_LENGTH)
        elif answer.said.done or episode.turns >= self.served.max_turns:
            self._finish(episode, "user_done" if answer.said.done else "max_turns")
        text = answer.said.text or answer.failure or answer.overflow or ""
        return self._observe(episode, "user", text, episode.state.goal_reward - before)

    def _finish(self, episode: Episode, end: str) -> None:
        episode.end = episode.state.ended = end
        episode.reward = self.served.env.reward(episode.state, episode.history)

    def _observe(self, episode: Episode, role: Literal["user", "tool"], content: str, credit: float, **extra: Any):
        done = episode.end is not None
        return JoshObservation(
            role=role, content=content, done=done, reward=episode.reward if done else credit,
            task_id=episode.task.id, goal_reward=episode.state.goal_reward,
            completed_goals=sorted(episode.state.completed), end_reason=episode.end, **extra,
        )  # fmt: skip

    def _mcp_call(self, name: str, arguments: dict[str, Any]) -> str:
        return self.step(JoshAction(tool_name=name, arguments=arguments)).content


def _jsonable(data: Any) -> Any:
    return None if data is None else json.loads(json.dumps(data, default=str))


def _tool_server(tools: list[dict[str, Any]], call: Any) -> FastMCP:
    """A FastMCP server listing the environment's tools with their own schemas; a call runs ``call(name, args)``."""
    server = FastMCP("josh")
    for schema in tools:
        spec = schema.get("function", schema)
        name = spec["name"]
        server.add_tool(
            FunctionTool(
                name=name, description=spec.get("description", ""),
                parameters=spec.get("parameters") or {"type": "object", "properties": {}},
                fn=functools.partial(_named_call, call, name),
            )
        )  # fmt: skip
    return server


def _named_call(call: Any, name: str, **arguments: Any) -> str:
    return call(name, arguments)


def default_user(env: str) -> str:
    """The rule-based user made for ``env``; τ-bench's scripted customer for retail and airline."""
    for name in USERS.names():
        entry = USERS.get(name)
        if not entry.needs_model and entry.envs and env in entry.envs:
            return name
    if env in ("retail", "airline"):
        return "retail_scripted"
    raise ValueError(f"josh has no rule-based user for {env!r}: name one with --user (an LLM user takes --user-model)")


def build_served(
    name: str,
    data: str = "mini",
    *,
    env_options: Mapping[str, Any] | None = None,
    user_kind: str | None = None,
    user_options: Mapping[str, Any] | None = None,
    user_llm: tuple[str, str, str | None] | None = None,
    max_turns: int = 15,
) -> Served:
    """The environment ``name`` over ``data`` with its user simulator (``user_kind``, by default the rule-based user
    made for it; an LLM user takes ``user_llm``: backend, model, base URL)."""
    kind = user_kind or default_user(name)
    entry = USERS.check(kind, env=name, options=user_options)
    llm = None
    if entry.needs_model:
        if user_llm is None:
            raise ValueError(f"the {kind} user needs an LLM: --user-backend and --user-model")
        llm = next(iter(build_llms(check_llms({user_llm: {}})).values()))
    env = build_env(name, data, env_options)
    user_sim = make_user(kind, llm, user_tools=env.user_tools or None, **dict(user_options or {}))
    return Served(name, env, user_sim, max_turns)


def serve_app(served: Served, *, max_sessions: int = 16) -> FastAPI:
    """OpenEnv's app (HTTP, WebSocket, MCP, task API) serving ``served``, one environment per session."""
    return create_app(
        functools.partial(JoshEnvironment, served), JoshAction, JoshObservation, env_name=served.name,
        max_concurrent_envs=max_sessions, state_cls=JoshState,
    )  # fmt: skip
