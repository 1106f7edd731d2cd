"""A josh environment for TRL's ``GRPOTrainer(environment_factory=...)``: one instance per rollout, the
environment's tools as its methods, the user simulator answering through ``talk_to_user``, and the reward from
``get_reward``.

An instance runs one episode of the served environment in process (``josh.run.openenv_server.JoshEnvironment``,
the same episodes ``josh env serve`` serves): ``reset`` starts the task a dataset row names (``task_id``) and
returns the user's opening message, which TRL appends to the row's last user message. Each tool call the model
makes runs on the episode and answers with the tool's result; ``talk_to_user`` says the model's words to the user
and answers with the user's reply, so the user simulator speaks between the model's turns. ``get_reward`` is the
final reward once the episode is over, else the share of the task's goals completed (the model stopped first).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from josh.run.openenv_server import JoshAction, JoshEnvironment, Served, build_served

JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list}
JSON_TYPES["object"] = dict


class TRLEnvironment:
    """The base of the classes ``trl_environment`` makes; see the module docstring."""

    served: ClassVar[Served]

    def __init__(self) -> None:
        self.episode = JoshEnvironment(self.served)

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the task ``task_id`` (the dataset row's; other columns are ignored); the user's opening message."""
        return self.episode.reset(task_id=task_id).content

    def talk_to_user(self, message: str) -> str:
        """Say something to the user and read their answer.

        Args:
            message: what to tell the user
        """
        return self._act(JoshAction(message=message))

    def get_reward(self) -> float:
        """The episode's final reward once it is over, else the share of its goals completed."""
        episode = self.episode.episode
        if episode is None:
            return 0.0
        return episode.reward if episode.end is not None else episode.state.goal_reward

    def _act(self, action: JoshAction) -> str:
        observation = self.episode.step(action)
        return observation.content

    @classmethod
    def rows(cls, split: str = "train", limit: int | None = None) -> list[dict[str, Any]]:
        """Training rows for TRL: each task's system prompt and an empty user turn (the opening fills it)."""
        env = cls.served.env
        return [
            {"prompt": [{"role": "system", "content": env.system_prompt(t)}, {"role": "user", "content": ""}],
             "task_id": t.id}
            for t in cls.served.tasks(split)[:limit]
        ]  # fmt: skip


def trl_environment(name: str, data: str = "mini", **options: Any) -> type[TRLEnvironment]:
    """A ``TRLEnvironment`` class for the environment ``name`` over ``data`` with its user simulator, with one method
    per tool: pass it as ``environment_factory``. ``options`` are ``josh.run.openenv_server.build_served``'s keyword
    arguments (``env_options``, ``user_kind``, ``user_options``, ``user_llm``, ``max_turns``)."""
    served = build_served(name, data, **options)
    methods: dict[str, Any] = {"served": served}
    for schema in served.env.tools:
        spec = schema.get("function", schema)
        if spec["name"] in ("reset", "get_reward", "talk_to_user", "rows") or spec["name"].startswith("_"):
            raise ValueError(f"{name}'s tool {spec['name']!r} clashes with a method TRL reserves or the class has")
        methods[spec["name"]] = tool_method(spec["name"], spec.get("description", ""), spec.get("parameters") or {})
    title = "".join(part.title() for part in name.replace("-", "_").split("_"))
    return type(f"{title}Environment", (TRLEnvironment,), methods)


def tool_method(name: str, description: str, parameters: Mapping[str, Any]) -> Callable[..., str]:
    """A method calling tool ``name``, with the signature, type hints and docstring from which transformers' schema
    reader (``get_json_schema``, as TRL uses it) writes the tool's schema back: optional arguments default to None."""
    properties: Mapping[str, Any] = parameters.get("properties", {})
    required = set(parameters.get("required", ()))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {"return": str}
    for key, spec in properties.items():
        kind = JSON_TYPES.get(spec.get("type", "string"), str)
        hints[key] = kind if key in required else kind | None
        default = inspect.Parameter.empty if key in required else None
        params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[key]))

    def method(self: TRLEnvironment, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        return self._act(JoshAction(tool_name=name, arguments=given))

    lines = [f"    {key}: {_described(key, spec)}" for key, spec in properties.items()]
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = hints
    method.__doc__ = _one_line(description or name) + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return method


def _described(key: str, spec: Mapping[str, Any]) -> str:
    """An argument's docstring line; its allowed values as transformers reads them (``(choices: [...])``)."""
    text = _one_line(spec.get("description") or key)
    return f"{text} (choices: {json.dumps(spec['enum'])})" if spec.get("enum") else text


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
