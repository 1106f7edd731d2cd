"""A τ²-bench domain (airline, retail, telecom) as a josh ``Env``: tools, policy and tasks from the installed
package, every tool call executed by τ²'s own environment, τ²'s evaluator as the final reward.

Rewards. ``reward`` is ``evaluate_simulation(..., EvaluationType.ALL)`` on the conversation's trajectory
(``josh.envs.tau2.trajectory``): DB hash, env assertions, actions and communicate checks as the task's reward basis
says; NL assertions too with a judge (``judge``, ``josh.envs.tau2.assertions``). The per-turn partial reward the
search uses is ``state.goal_reward``: the share of the task's gold *write* calls (τ² tool type ``WRITE``, requestor
assistant) that the agent has made, matched as τ²'s action check does; a task without gold writes gives 0.0, so
doing nothing never earns partial credit.

Bad calls are categorised like retail's (unknown tool, unknown or missing argument; a τ² error is a tool error)
and still reach τ²'s environment, which answers them without changing anything, so the trajectory stays τ²'s.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from tau2.data_model.message import ToolCall as Tau2Call
from tau2.environment.toolkit import ToolType

from josh.core.env import EnvBase
from josh.envs.tau2.assertions import JudgeCall
from josh.envs.tau2.fresh import pristine
from josh.envs.tau2.package import Tau2Error, check_domain, require_tau2
from josh.envs.tau2.state import Tau2State
from josh.envs.tau2.tasks import SPLITS, env_name, load_tau2_tasks, to_task
from josh.envs.tau2.trajectory import evaluate, to_trajectory
from josh.types import ErrorCategory, Message, Task, ToolCall, ToolResult

TRANSFER = "transfer_to_human_agents"
TERMINATED = "Error: the conversation was already transferred to a human agent"


def _schemas(tools: Iterable[Any]) -> dict[str, dict[str, Any]]:
    return {tool.name: tool.openai_schema for tool in tools}


class Tau2Env(EnvBase):
    """One τ² domain (see the module docstring); ``data`` is not used: the data is the installed package's."""

    def __init__(self, domain: str, judge: str | None = None, environment: Any | None = None) -> None:
        """``environment``: the τ² environment every task starts from, never changed (default: the process's one
        load of the domain, ``josh.envs.tau2.fresh.pristine``, which the evaluator's fresh environments share)."""
        require_tau2()
        self.domain = check_domain(domain)
        self.splits = SPLITS[self.domain]
        self.judge = judge  # BACKEND:MODEL of the NL-assertion judge (--env-option judge=...); None: NL assertions off
        self.judge_call: JudgeCall | None = None  # attached by the run that builds the judge (josh.run.env_judge)
        self.name = env_name(domain)
        self._template = template = pristine(self.domain) if environment is None else environment
        schemas = _schemas(template.get_tools())
        self.tools: list[dict[str, Any]] = list(schemas.values())
        self.user_tools: list[dict[str, Any]] = (
            list(_schemas(template.get_user_tools()).values()) if template.user_tools is not None else []
        )
        self._user_tool_names = frozenset(tool["function"]["name"] for tool in self.user_tools)
        self.policy: str = template.get_policy()
        kinds = {name: template.tools.tool_type(name) for name in schemas}
        self.write_tools = self.goal_tools = frozenset(n for n, kind in kinds.items() if kind == ToolType.WRITE)
        self._parameters = {name: schema["function"]["parameters"] for name, schema in schemas.items()}
        self._tasks: dict[str, list[Task]] = {}
        self._tau2: dict[str, Any] = {}
        self._pristine: dict[str, Any] = {}

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``split`` (``train``, ``test``, ``base``; telecom also ``small`` and ``full``)."""
        if split not in self._tasks:
            loaded = load_tau2_tasks(self.domain, split)
            tasks = [to_task(self.domain, t, split, self.write_tools) for t in loaded]
            self._tau2.update((task.id, t) for task, t in zip(tasks, loaded, strict=True))
            self._tasks[split] = tasks
        return self._tasks[split]

    def task(self, task_id: str) -> Task:
        """The task ``task_id`` (any split); an unknown id raises ``Tau2Error``."""
        for split in SPLITS[self.domain]:
            found = next((t for t in self.tasks(split) if t.id == task_id), None)
            if found is not None:
                return found
        raise Tau2Error(f"{self.name} has no task {task_id!r}; ids look like {self.tasks('base')[0].id!r}")

    def tau2_task(self, task: Task) -> Any:
        """τ²'s own ``Task`` behind ``task``."""
        if task.id not in self._tau2:
            self.task(task.id)
        return self._tau2[task.id]

    def system_prompt(self, task: Task) -> str:
        """The domain policy of the installed package."""
        return self.policy

    def reset(self, task: Task) -> Tau2State:
        if task.env != self.name:
            raise ValueError(f"task {task.id} belongs to env {task.env!r}, not {self.name!r}")
        if task.id not in self._pristine:
            initial = self.tau2_task(task).initial_state
            environment = self._template  # shared by every task without an initial state: states copy on write
            if initial is not None:
                environment = copy.deepcopy(self._template)
                environment.set_state(
                    initialization_data=initial.initialization_data,
                    initialization_actions=initial.initialization_actions,
                    message_history=initial.message_history or [],
                )
            self._pristine[task.id] = environment
        return Tau2State(task, self._pristine[task.id])

    def category(self, call: ToolCall) -> ErrorCategory | None:
        """How josh counts a call with JSON-object arguments as bad API use (unknown tool, including a tool of the
        user's device; unknown or missing argument), else ``None``; τ² still answers it, changing nothing."""
        schema = self._parameters.get(call.name)
        if schema is None:
            return ErrorCategory.UNKNOWN_TOOL
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        if any(key not in schema.get("properties", {}) for key in arguments):
            return ErrorCategory.UNKNOWN_ARGUMENT
        if any(key not in arguments for key in schema.get("required", ())):
            return ErrorCategory.MALFORMED
        return None

    def step(self, state: Any, call: ToolCall) -> ToolResult:
        """Run one tool call through τ²'s environment on ``state``; bad calls come back as categorised errors. The
        goals a call completes guide the search; the reward is τ²'s own evaluation at the end (``score``)."""
        if not isinstance(state, Tau2State):
            raise TypeError(f"Tau2Env.call needs a Tau2State from reset, got {type(state).__name__}")
        if state.terminated:
            return ToolResult(content=TERMINATED, error=ErrorCategory.TOOL_ERROR)
        if not isinstance(call.arguments, dict):
            return ToolResult(f"Error: the arguments of {call.name} must be a JSON object", ErrorCategory.MALFORMED)
        category = self.category(call)
        writes = category is None and call.name in self.write_tools
        tau2_call = Tau2Call(id=call.id, name=call.name, arguments=dict(call.arguments), requestor="assistant")
        response = state.respond(tau2_call, changes=writes)
        state.calls.append((call.id, tau2_call, response))
        error = category or (ErrorCategory.TOOL_ERROR if response.error else None)
        completed = self._goal_met(state, tau2_call) if writes else ()
        terminal = call.name == TRANSFER and error is None
        return ToolResult(content=response.content or "", error=error, completed_goals=completed, terminal=terminal)

    def user_call(self, state: Tau2State, call: ToolCall) -> ToolResult:
        """Run a call of the user's device tools (telecom) as the user (τ² requestor ``user``); an agent tool or an
        unknown one is ``UNKNOWN_TOOL``, arguments that are not a JSON object ``MALFORMED``, τ²'s error a tool error.
        The call is kept in ``state.calls`` (the trajectory) but not in ``state.log`` (the agent's calls)."""
        if not isinstance(call.arguments, dict):
            return ToolResult(f"Error: the arguments of {call.name} must be a JSON object", ErrorCategory.MALFORMED)
        tau2_call = Tau2Call(id=call.id, name=call.name, arguments=dict(call.arguments), requestor="user")
        response = state.respond(tau2_call, changes=True)
        state.calls.append((call.id, tau2_call, response))
        category = None if call.name in self._user_tool_names else ErrorCategory.UNKNOWN_TOOL
        error = category or (ErrorCategory.TOOL_ERROR if response.error else None)
        return ToolResult(content=response.content or "", error=error)

    def _goal_met(self, state: Tau2State, call: Any) -> tuple[int, ...]:
        """The first not-yet-completed gold write that τ²'s action check matches with ``call``, if any."""
        actions = [
            a for a in self.tau2_task(state.task).evaluation_criteria.actions or [] if a.requestor == "assistant"
        ]
        writes = [a for a in actions if a.name in self.write_tools]
        for index in state.remaining:
            if writes[index].compare_with_tool_call(call):
                return (index,)
        return ()

    def score(self, state: Tau2State, messages: list[Message]) -> Any:
        """τ²'s ``RewardInfo`` for the conversation, ended as ``state.ended`` says (see ``josh.envs.tau2.trajectory``)."""
        if self.judge is not None and self.judge_call is None:
            raise Tau2Error(f"{self.name}: the NL-assertion judge {self.judge} was named but never attached")
        trajectory = to_trajectory(messages, state.calls)
        return evaluate(self.domain, self.tau2_task(state.task), trajectory, state.ended, self.judge_call)

    @property
    def reward_notes(self) -> dict[str, str]:
        """How the final reward was scored, for the evaluation summary."""
        return {"τ² NL assertions": f"judged by {self.judge}" if self.judge else "off"}

    def reward(self, state: Any, messages: list[Message]) -> float:
        """τ²'s evaluator (``EvaluationType.ALL``; NL assertions only with a judge) on the conversation's trajectory:
        0.0 when it was cut short (``state.ended``: ``max_turns``, ``agent_error``, ``user_error``, ``context_length``,
        ``user_context_length``), as τ² scores such runs."""
        return float(self.score(state, messages).reward)
