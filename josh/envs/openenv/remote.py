"""An OpenEnv server as a josh environment: ``--env openenv:URL`` runs josh's evaluation and search on it.

The server holds the episode and its user: a tool call is a step with ``tool_name`` and ``arguments``, a message to
the user a step with ``message``, answered with the tool's result or the user's reply (the actions ``josh env
serve`` takes). The tools are the ones the server lists over MCP; the tasks and their goals come from its task API
(``/{name}/tasks``), its name from ``/metadata`` (which agents run on it is checked against that name). A goal the
server credits (``completed_goals``) completes it here; the final reward is the server's at the end of the episode,
and the goal share for a conversation josh ended first. The state keeps the branch's actions and their answers;
``sessions.py`` says how a branch is rebuilt on the server and what that costs. A URL that does not answer is one
line (``ValueError``) before any work.
"""

from __future__ import annotations

from typing import Any, ClassVar

import requests

from josh.envs.base import ConversationState, EnvBase
from josh.envs.openenv.sessions import Action, Sessions, Step
from josh.types import CallRecord, ErrorCategory, Message, Task, ToolCall, ToolResult

PREFIX = "openenv:"


def is_remote(env: str) -> bool:
    """``env`` names an OpenEnv server (``openenv:URL``)."""
    return env.startswith(PREFIX)


def _get(url: str, path: str, **body: Any) -> Any:
    try:
        reply = requests.post(url + path, json=body, timeout=30) if body else requests.get(url + path, timeout=30)
        reply.raise_for_status()
        return reply.json()
    except requests.RequestException as exc:
        reason = type(exc).__name__ if isinstance(exc, requests.ConnectionError) else exc
        raise ValueError(f"the OpenEnv server {url} does not answer {path} ({reason})") from None


def served_name(env: str) -> str:
    """The name the OpenEnv server of ``env`` (``openenv:URL``) gives itself; one line when it does not answer."""
    url = env.removeprefix(PREFIX).rstrip("/")
    _get(url, "/health")
    return str(_get(url, "/metadata").get("name", "openenv"))


class RemoteState(ConversationState):
    """One branch on the server: the task, its actions and their answers (per branch), the sessions (shared)."""

    __slots__ = ("sessions", "actions", "answers", "final")
    shared_fields: ClassVar[tuple[str, ...]] = ("task", "sessions")
    branch_fields: ClassVar[tuple[str, ...]] = ConversationState.branch_fields + ("actions", "answers", "final")

    def __init__(self, task: Task, sessions: Sessions) -> None:
        super().__init__(task)
        self.sessions = sessions
        self.actions: list[Action] = []
        self.answers: list[Step] = []
        self.final: float | None = None

    def act(self, action: Action) -> Step:
        """The server's answer to ``action`` on this branch; it counts the goals it credits and keeps the end."""
        answer = self.sessions.step(self.task.id, self.actions, self.answers, action)
        self.actions.append(action)
        self.answers.append(answer)
        self._note(answer)
        return answer

    def user_says(self, transcript: list[Message]) -> tuple[str, bool]:
        """The server's user answering the agent's last words (nothing said yet: its opening); and whether the
        episode is over. The user simulator lives on the server (``josh.run.user_turn`` asks this state)."""
        if not transcript:
            answer = self.sessions.opening(self.task.id)
            self._note(answer)
        else:
            last = transcript[-1]  # the agent's words; a turn that ended without speaking says nothing
            answer = self.act({"message": (last.content or "") if last.role == "assistant" else ""})
        return str(answer.get("content", "")), bool(answer["done"])

    def _note(self, answer: Step) -> None:
        self.completed.update(answer.get("completed_goals") or ())
        if answer["done"]:
            self.final = float(answer["reward"] or 0.0)
            self.terminated = answer.get("end_reason") == "terminated"


class RemoteEnv(EnvBase):
    """The OpenEnv server at ``url`` (see the module docstring); ``sessions``: most server sessions at once."""

    def __init__(self, url: str, sessions: int = 8) -> None:
        self.url = url.removeprefix(PREFIX).rstrip("/")
        self.name = served_name(self.url)
        listed = _get(self.url, "/mcp", jsonrpc="2.0", id=1, method="tools/list", params={})
        if "result" not in listed:
            raise ValueError(f"the OpenEnv server {self.url} lists no tools over MCP: {listed.get('error')}")
        self.tools = [
            {"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("inputSchema") or {"type": "object"}}}
            for t in listed["result"]["tools"]
        ]  # fmt: skip
        self.splits = tuple(s["name"] for s in _get(self.url, f"/{self.name}/splits"))
        self.pool = Sessions(self.url, sessions)
        self._prompts: dict[str, str] = {}

    @property
    def replayed(self) -> int:
        """Steps replayed on the server to rebuild branches so far (``sessions.py``)."""
        return self.pool.replayed

    def tasks(self, split: str) -> list[Task]:
        return [Task.model_validate(t) for t in _get(self.url, f"/{self.name}/tasks", split=split)["tasks"]]

    def system_prompt(self, task: Task) -> str:
        if task.id not in self._prompts:
            self._prompts[task.id] = str(self.pool.opening(task.id).get("system_prompt") or "")
        return self._prompts[task.id]

    def reset(self, task: Task) -> ConversationState:
        return RemoteState(task, self.pool)

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        assert isinstance(state, RemoteState)
        before = set(state.completed)
        try:
            answer = state.act({"tool_name": call.name, "arguments": call.arguments})
        except Exception as exc:  # the server refused the action (a malformed call): that call's error
            result = ToolResult(content=f"Error: {exc}", error=ErrorCategory.MALFORMED)
        else:
            error = answer.get("error")
            result = ToolResult(
                content=str(answer.get("content", "")),
                error=ErrorCategory(error) if error else None,
                completed_goals=tuple(sorted(state.completed - before)),
                terminal=state.terminated,
                data=answer.get("data"),
            )
        state.log.append(CallRecord(call.name, call.arguments, result.content, result.error, result.completed_goals))
        return result

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        """The server's final reward; the goal share when josh ended the conversation before the server did."""
        assert isinstance(state, RemoteState)
        return state.final if state.final is not None else state.goal_reward
