"""The ``grpo:`` section of a training recipe: which environment, tasks, agent and user simulator the online GRPO
rollouts run in, and the GRPO settings (``josh train grpo``, ``josh.training.grpo.trainer``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from josh.run.spec import AgentSpec, EnvSpec, UserSpec
from josh.training.trl_args import TRLArguments


class GRPOSpec(UserSpec, AgentSpec, EnvSpec, TRLArguments):
    """Online GRPO: every step rolls out ``num_generations`` whole conversations per task with the policy being
    trained, scores each with the environment's reward and takes a GRPO step on the agent's tokens. The environment,
    agent and user are the run spec's parts (the agent's LLM is the policy; a user simulator never shares it)."""

    split: str = "train"
    skip: int = Field(0, ge=0, description="tasks skipped at the start of the split")
    limit: int | None = Field(None, ge=1, description="tasks to train on (default: the rest of the split)")
    task_ids: list[str] | None = Field(None, description="exactly these tasks of the split (overrides skip/limit)")
    agent: str = Field("act", description="the prompted agent whose outputs are trained: act, react, function_calling")
    num_generations: int = Field(4, ge=2, description="conversations per task and step (the GRPO group)")
    max_turns: int = Field(4, ge=1, description="agent turns per conversation")
    max_new_tokens: int = Field(128, ge=1, description="tokens per agent generation")
    temperature: float = Field(1.0, gt=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    beta: float = Field(0.0, ge=0.0, description="KL coefficient (0: no reference model)")
    epsilon: float = Field(0.2, gt=0.0, description="PPO clipping range")
    loss_type: str = Field("dapo", description="TRL's GRPO loss: dapo, grpo, dr_grpo, bnpo, ...")
    scale_rewards: Literal["group", "batch", "none"] = "group"
    num_iterations: int = Field(1, ge=1, description="optimisation passes over each batch of rollouts")
    max_batch_size: int = Field(32, ge=1, description="rows in one generate call during rollouts")
    prefix_cache_tokens: int = Field(8192, ge=0, description="shared-prefix cache of one rollout batch (0: off)")
    generation: Literal["hf", "vllm"] = Field(
        "hf",
        description="what generates the rollouts: hf (the policy itself, transformers' generate) or vllm (TRL's "
        "vLLM engine colocated in the training process, the policy's weights synced into it before each step's "
        "rollouts; needs vLLM, e.g. make vllm-env)",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0.0, le=1.0, description="GPU memory share of the colocated vLLM engine (generation: vllm, on GPU)"
    )
    max_llm_calls: int | None = Field(
        None,
        ge=1,
        description="stop after the step whose rollouts bring the LLM calls (agent and user, every process) to this "
        "many: GRPO at a fixed cost, e.g. a JOSH search's",
    )
