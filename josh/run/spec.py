"""The run spec: what one run is made of. The environment and its data, the agent with its options and LLM, the user
simulator with its options and LLM. ``josh eval`` and ``josh rollout`` generate their run options from its fields,
a loop recipe's ``setup`` is one, and ``josh.run.components`` builds the pieces from it (checking every name and option
against the registries first). Its parts serve specs that need only some of it (GRPO trains the agent's own model,
so its ``grpo:`` section is an ``EnvSpec``, an ``AgentSpec`` and a ``UserSpec``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EnvSpec(_Part):
    """The environment, its data and its options."""

    env: str = Field("toolwoz", description="environment")
    data: str = Field("mini", description="data source: 'mini', 'toolwoz' (the paper's) or a folder (see `josh data`)")
    env_options: dict[str, Any] = Field(default_factory=dict, description="environment option")


class AgentSpec(_Part):
    """The agent and its options."""

    agent: str = Field("react", description="agent")
    agent_options: dict[str, Any] = Field(default_factory=dict, description="agent option")


class AgentLLMSpec(_Part):
    """The agent's LLM."""

    backend: str = Field("hf", description="agent LLM backend")
    model: str | None = Field(
        "smollm2", description="agent model: hub id, local folder, checkpoint/adapter folder, or smollm2"
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint of the agent's openai backend, e.g. http://HOST:8000/v1"
    )
    llm_options: dict[str, Any] = Field(
        default_factory=dict,
        description="agent backend setting (shared with a user simulator on the same backend and model)",
    )


class UserSpec(_Part):
    """The user simulator, its options and its LLM."""

    user: str = Field("agenda", description="user simulator")
    user_options: dict[str, Any] = Field(default_factory=dict, description="user simulator option")
    user_backend: str | None = Field(None, description="user LLM backend (default: the agent's)")
    user_model: str | None = Field(
        None, description="user LLM model (default: the agent's; the same pair shares one backend)"
    )
    user_base_url: str | None = Field(
        None,
        description="endpoint of the user's openai backend (default: --base-url when the user shares the agent's model)",
    )


class RunSpec(UserSpec, AgentLLMSpec, AgentSpec, EnvSpec):
    """See the module docstring; each field's description is also its command-line help."""


class JudgeSpec(_Part):
    """An LLM judge: its backend, model and backend settings (``base_url`` among them), whether it answers under a
    grammar, the most tokens it writes per answer, and how many requests it keeps in flight (``josh judge``, ``josh
    eval --judge``, ``josh arena``, ``extract.judge``)."""

    backend: str = Field("hf", description="the judge's LLM backend")
    model: str | None = Field("smollm2", description="the judge's model")
    llm_options: dict[str, Any] = Field(default_factory=dict, description="the judge backend's settings")
    grammar: bool = Field(True, description="constrain the judge's answer with a grammar (false for OpenAI's API)")
    max_tokens: int = Field(400, ge=1, description="most tokens the judge writes per answer (a cut answer fails)")
    concurrency: int = Field(8, ge=1, description="judge requests in flight at the same time")

    @property
    def name(self) -> str:
        """The judge's name, as judgements record it."""
        return f"{self.backend}:{self.model}"

    @property
    def uses_grammar(self) -> bool:
        """Whether the judge answers under the grammar (not on OpenAI's own API, which takes none)."""
        return self.grammar and not (self.backend == "openai" and not self.llm_options.get("base_url"))

    def llm_key(self) -> tuple[tuple[str, str | None, str | None], dict[str, Any]]:
        """((backend, model, base URL), the other settings): what ``josh.run.components.check_llms`` takes."""
        settings = dict(self.llm_options)
        return (self.backend, self.model, settings.pop("base_url", None)), settings
