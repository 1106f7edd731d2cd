"""The ``lending`` environment: a library desk where the agent finds a book and lends it to a member."""

from __future__ import annotations

import json
from typing import Any

from josh.core.env import ConversationState, EnvBase
from josh.types import ErrorCategory, Goal, Message, Task, ToolCall, ToolResult, user

SHELVES = {"Dune": "B2", "Emma": "A7", "Ulysses": "C4"}
LOANS = {  # split -> (member card, title) of each task
    "train": [("1001", "Dune"), ("1002", "Emma")],
    "test": [("2001", "Ulysses")],
}


def _tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    properties = {key: {"type": "string", "description": text} for key, text in parameters.items()}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


TOOLS = [
    _tool("find_book", "Look a title up: its shelf.", title="the book's title"),
    _tool("lend", "Lend a book to a member.", title="the book's title", card="the member's card number"),
]


class LendingEnv(EnvBase):
    """Two tools; a task's goal is one ``lend`` call; the reward is the share of goals met."""

    name = "lending"
    tools = TOOLS
    splits = tuple(LOANS)
    write_tools = frozenset({"lend"})

    def system_prompt(self, task: Task) -> str:
        return "You are the lending desk of a library. Find the book the member asks for and lend it to them."

    def tasks(self, split: str) -> list[Task]:
        if split not in LOANS:
            raise ValueError(f"unknown lending split {split!r}; known splits: {', '.join(LOANS)}")
        return [
            Task(
                id=f"lending-{split}-{i}",
                env=self.name,
                split=split,
                user_goal=f"You want to borrow {title}. Your library card number is {card}.",
                goals=[Goal(name="lend", parameters={"title": title, "card": card})],
                details={"shelf": SHELVES[title]},
                transcript=[user(f"Hello, I'd like to borrow {title}. My card number is {card}.")],
            )
            for i, (card, title) in enumerate(LOANS[split])
        ]

    def reset(self, task: Task) -> ConversationState:
        return ConversationState(task)

    def step(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """One tool call: what the agent sees and the goals it met; josh logs it and counts the goals."""
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        title = arguments.get("title")
        if call.name not in ("find_book", "lend"):
            return ToolResult(f"Error: unknown tool {call.name!r}", ErrorCategory.UNKNOWN_TOOL)
        if not isinstance(title, str) or title not in SHELVES:
            return ToolResult(f"Error: no book titled {title!r}", ErrorCategory.INVALID_VALUE)
        if call.name == "find_book":
            return ToolResult(json.dumps({"title": title, "shelf": SHELVES[title]}))
        met = tuple(i for i in state.remaining if state.task.goals[i].parameters == arguments)
        return ToolResult(json.dumps({"lent": title, "card": arguments.get("card")}), completed_goals=met)

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        return state.goal_reward


def register() -> None:
    """The ``josh.environments`` entry point: ``--env lending``."""
    from josh.envs import register_env

    register_env("lending", lambda data: LendingEnv(), own_data="lends its own books", summary="a library desk")
