"""The client side of someone else's OpenEnv server: what it offers, read from its own endpoints, and its answers
read as josh's (``josh env serve``, the server side, is ``josh.run.openenv_server``).

Any OpenEnv server has ``/health``, ``/list_environments`` or ``/metadata`` (its name), ``/schema`` (its action's fields) and its tools over
MCP (``/mcp``, ``tools/list``); a tool call is OpenEnv's standard MCP action (``{"type": "call_tool", "tool_name",
"arguments"}``), which ``josh env serve`` takes too. Two things only some servers have, each detected:

- **a user**: the action has a ``message`` field (``josh env serve``: the agent's words, answered by the user
  simulator inside). Without one, nobody answers the agent's words.
- **a task list**: OpenEnv's task API (``/{env_name}/splits``, ``/tasks``) lists josh task records. Without one (it
  answers 501 or 404), a task is an episode by seed (``reset(seed=...)``).

A tool's answer is either josh's (``content``, ``error`` category) or OpenEnv's ``CallToolObservation`` (``result``:
the MCP call result, ``error``: a transport or tool error); ``tool_answer`` reads both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from josh.types import ErrorCategory

OPENING_KEYS = ("content", "prompt", "question", "instruction", "message", "text", "task")
"""Where the opening of a server without a user is read from: the reset observation's first text field of these
(in the observation, then in its ``metadata``), else the observation as JSON."""

MCP_ERRORS = {
    "tool_not_found": ErrorCategory.UNKNOWN_TOOL,
    "invalid_args": ErrorCategory.INVALID_VALUE,
}


def get(url: str, path: str, *, missing_ok: bool = False, **body: Any) -> Any:
    """The JSON answer to GET ``path`` (POST ``body`` when given); one line (``ValueError``) when the server does not
    answer; None for a 404 or 501 with ``missing_ok`` (an endpoint the server does not offer)."""
    try:
        reply = httpx.post(url + path, json=body, timeout=30) if body else httpx.get(url + path, timeout=30)
        if missing_ok and reply.status_code in (404, 501):
            return None
        reply.raise_for_status()
        return reply.json()
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        if isinstance(exc, httpx.HTTPStatusError):
            reason: Any = f"HTTP {exc.response.status_code} {exc.response.reason_phrase}"
        else:
            reason = type(exc).__name__ if isinstance(exc, httpx.TransportError) else exc
        raise ValueError(f"the OpenEnv server {url} does not answer {path} ({reason})") from None


@dataclass(frozen=True)
class Server:
    """One OpenEnv server's name and what it offers (see the module docstring)."""

    url: str
    name: str
    tools: list[dict[str, Any]]
    splits: tuple[str, ...] | None
    """its task API's splits; None: no task API (tasks are episodes by seed)"""
    has_user: bool

    @property
    def task_path(self) -> str:
        return f"/{self.name}/tasks"


def name_of(url: str) -> str:
    """The server's name: the environment its routes name (``/list_environments``, e.g. the task API's path), else
    its ``/metadata`` name; one line (``ValueError``) when it does not answer."""
    get(url, "/health")
    named = get(url, "/list_environments", missing_ok=True)
    return str(named[0]) if named else str(get(url, "/metadata").get("name", "openenv"))


def probe(url: str) -> Server:
    """Ask the server at ``url`` what it offers; one line (``ValueError``) when it does not answer."""
    name = name_of(url)
    listed = get(url, "/mcp", jsonrpc="2.0", id=1, method="tools/list", params={})
    if "result" not in listed:
        raise ValueError(f"the OpenEnv server {url} lists no tools over MCP: {listed.get('error')}")
    tools = [
        {"type": "function", "function": {"name": t["name"], "description": t.get("description") or "",
                                          "parameters": t.get("inputSchema") or {"type": "object"}}}
        for t in listed["result"]["tools"]
    ]  # fmt: skip
    action = (get(url, "/schema").get("action") or {}).get("properties") or {}
    splits = get(url, f"/{name}/splits", missing_ok=True)
    return Server(
        url=url, name=name, tools=tools,
        splits=None if splits is None else tuple(s["name"] for s in splits), has_user="message" in action,
    )  # fmt: skip


def call_action(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """OpenEnv's standard MCP tool call as a step's action."""
    return {"type": "call_tool", "tool_name": name, "arguments": arguments}


def tool_answer(observation: dict[str, Any]) -> tuple[str, ErrorCategory | None, Any]:
    """A tool step's observation as (the text the agent sees, its error category, its structured data)."""
    if "result" not in observation:  # josh's answer: the text and josh's error category
        error = observation.get("error")
        return str(observation.get("content", "")), ErrorCategory(error) if error else None, observation.get("data")
    error, result = observation.get("error"), observation.get("result")
    if error:  # OpenEnv's ToolError: the call did not run
        kind = MCP_ERRORS.get(str(error.get("error_type")), ErrorCategory.TOOL_ERROR)
        return f"Error: {error.get('message', '')}", kind, None
    if not isinstance(result, dict):
        return _text(result), None, result
    texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict) and c.get("type") == "text"]
    text = "\n".join(texts) if texts else _text(result.get("data"))
    return text, ErrorCategory.TOOL_ERROR if result.get("is_error") else None, result.get("data")


def opening_text(observation: dict[str, Any]) -> str:
    """The words a reset observation opens with (see ``OPENING_KEYS``)."""
    for place in (observation, observation.get("metadata") or {}):
        for key in OPENING_KEYS:
            if isinstance(place.get(key), str) and place[key]:
                return place[key]
    rest = {k: v for k, v in observation.items() if k not in ("reward", "done") and v not in (None, {}, [], "")}
    return _text(rest) if rest else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
