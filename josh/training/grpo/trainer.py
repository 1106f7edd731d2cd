"""``josh train grpo``: online GRPO with TRL's ``GRPOTrainer`` on whole conversations in a josh environment.

TRL owns the algorithm (group advantages, clipped policy loss, optional KL to the adapter-free reference, LoRA,
4-bit, accelerate, wandb, checkpoints and resume); josh supplies the rollouts through TRL's ``rollout_func``
(``josh.training.grpo.rollout``: the conversation loop with the user simulator, the environment's reward, skips) and
a reward function that hands TRL the environment's reward of each rollout. The dataset is one row per training task
whose prompt names the task; what the agent actually sees is built by josh for every rollout. The rollouts generate
with the policy itself (``grpo.generation: hf``) or with TRL's colocated vLLM engine, into which TRL syncs the policy's
weights before every step's rollouts (``generation: vllm``, ``josh.training.grpo.vllm``).

TRL's built-in multi-turn support (``environment_factory``) was the other road: it exposes an environment's methods
as tools in the model's native tool-call format and loops over tool calls only, so it has no place for a user
simulator's turns, cannot run josh's ReACT or ACT text protocols, and parses calls with TRL's own schemas. A
``rollout_func`` keeps every josh agent, user and environment as they are in evaluation and search.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from josh.agents import AGENTS
from josh.core.llm import Sampling
from josh.envs import build_env
from josh.llm.health import stop_if_failing
from josh.run.components import build_agent, build_llms, build_user, check_llms
from josh.training.config import base_arguments, with_trl
from josh.training.data import to_dataset
from josh.training.grpo.ledger import rollout_ledger
from josh.training.grpo.rollout import (
    BoundedLLM,
    RolloutStats,
    WatchedEnv,
    converse,
    derive_seed,
    encode,
    mark_equal_groups,
    run_batch,
    tally,
)
from josh.training.grpo.vllm import check_vllm, colocated_backend, colocated_cpu_engine, vllm_arguments
from josh.training.model import load_tokenizer, lora_config
from josh.training.recipe import RecipeError, TrainRecipe
from josh.users import USERS
from josh.util.patching import env_default

NOT_IN_GRPO_CONFIG = ("max_length", "dataset_num_proc")


def tasks_of(recipe: TrainRecipe) -> tuple[Any, list[Any]]:
    """The environment and the training tasks the ``grpo`` section names."""
    spec = recipe.grpo
    env = build_env(spec.env, spec.data)
    tasks = env.tasks(spec.split)
    if spec.task_ids is not None:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in spec.task_ids if i not in by_id]
        if missing:
            raise RecipeError(f"grpo.task_ids: {', '.join(missing[:5])} not in the {spec.split} split of {spec.env}")
        return env, [by_id[i] for i in spec.task_ids]
    end = spec.skip + spec.limit if spec.limit is not None else None
    return env, tasks[spec.skip : end]


def check_recipe(recipe: TrainRecipe, n_tasks: int) -> None:
    """Refuse before any model loads: no tasks, batches that split groups, components GRPO cannot train."""
    spec, opt = recipe.grpo, recipe.optim
    if n_tasks == 0:
        raise RecipeError(f"grpo: no {spec.split} tasks to train on (check grpo.split, skip, limit, task_ids)")
    batch = opt.per_device_train_batch_size * opt.gradient_accumulation_steps
    if batch % spec.num_generations:
        raise RecipeError(
            f"GRPO rolls out groups of grpo.num_generations={spec.num_generations} conversations per task: "
            f"optim.per_device_train_batch_size x gradient_accumulation_steps ({batch}) must be a multiple of it"
        )
    if n_tasks < batch // spec.num_generations:
        raise RecipeError(f"grpo: one step needs {batch // spec.num_generations} tasks, the recipe gives {n_tasks}")
    try:
        agent = AGENTS.check(spec.agent, env=spec.env, options=spec.agent_options)
        user = USERS.check(spec.user, env=spec.env, options=spec.user_options)
    except ValueError as exc:
        raise RecipeError(f"grpo: {exc}") from None
    if not agent.needs_model:
        raise RecipeError(f"grpo.agent {spec.agent!r} is scripted: GRPO trains a prompted agent (act, react, ...)")
    if user.needs_model and spec.user_backend is None:
        raise RecipeError(
            f"grpo.user {spec.user!r} needs an LLM: set grpo.user_backend and grpo.user_model (a user simulator never "
            "shares the policy being trained)"
        )
    if spec.generation == "vllm":
        check_vllm()


def prepare_tasks(recipe: TrainRecipe) -> tuple[list[dict[str, Any]], Any]:
    """The dataset rows (one per task) and the tokenizer, after every cheap check."""
    env, tasks = tasks_of(recipe)
    check_recipe(recipe, len(tasks))
    tokenizer = load_tokenizer(recipe, need_masks=True)
    return [{"prompt": [{"role": "user", "content": t.id}], "task_id": t.id} for t in tasks], tokenizer


def grpo_arguments(recipe: TrainRecipe, output_dir: Path) -> dict[str, Any]:
    """The ``GRPOConfig`` keyword arguments josh sets: the shared ones, then GRPO's own (and the vLLM engine's, if it
    generates)."""
    spec = recipe.grpo
    args = {k: v for k, v in base_arguments(recipe, output_dir).items() if k not in NOT_IN_GRPO_CONFIG}
    args["include_num_input_tokens_seen"] = "no"  # GRPO counts the prompt and completion tokens it trains on
    return {
        **args,
        "num_generations": spec.num_generations,
        "max_completion_length": recipe.max_length,
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "beta": spec.beta,
        "epsilon": spec.epsilon,
        "loss_type": spec.loss_type,
        "scale_rewards": spec.scale_rewards,
        "num_iterations": spec.num_iterations,
        "mask_truncated_completions": False,
        "log_completions": False,
        **vllm_arguments(recipe),
    }


def config(recipe: TrainRecipe, output_dir: Path) -> Any:
    """TRL's ``GRPOConfig`` of the recipe, its ``grpo.trl`` arguments included."""
    from trl import GRPOConfig  # optional: the train extra

    return GRPOConfig(**with_trl(recipe, grpo_arguments(recipe, output_dir)))


class ConversationRollout:
    """TRL's ``rollout_func`` (see ``josh.training.grpo.rollout``), keeping a running ``RolloutStats``."""

    def __init__(self, recipe: TrainRecipe, tokenizer: Any) -> None:
        self.recipe, self.tokenizer = recipe, tokenizer
        env, tasks = tasks_of(recipe)
        self.env = WatchedEnv(env)
        self.tasks = {t.id: t for t in tasks}
        self.user_llm = self._user_llm()
        self.user = build_user(self.env, recipe.grpo.user, self.user_llm, recipe.grpo.user_options)
        self.stats = RolloutStats(max_llm_calls=recipe.grpo.max_llm_calls)
        self.batches_at: dict[int, int] = {}  # rollout batches so far at each optimizer step
        self.__name__ = "josh_conversations"

    def _user_llm(self) -> Any:
        """The user simulator's own LLM, built like every run's (its settings checked, its endpoint asked first)."""
        spec = self.recipe.grpo
        needs_model = USERS.check(spec.user, env=spec.env, options=spec.user_options).needs_model
        if spec.user_backend is None or not needs_model:  # a rule-based user ignores the recipe's user LLM
            return None
        key = (spec.user_backend, spec.user_model, spec.user_base_url)
        return build_llms(check_llms({key: {}}))[key]

    def agent_on(self, llm: Any) -> Any:
        """The recipe's agent generating with ``llm`` (bounded by ``max_length``) at the recipe's sampling."""
        spec = self.recipe.grpo
        sampling = Sampling(temperature=spec.temperature, top_p=spec.top_p, max_new_tokens=spec.max_new_tokens)
        bounded = BoundedLLM(llm, self.tokenizer, self.recipe.max_length)
        return build_agent(self.env, spec.agent, bounded, spec.agent_options, sampling)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from josh.llm.hf import HFLLM  # optional: the train extra

        spec = self.recipe.grpo
        keys = [prompt[-1]["content"] for prompt in prompts]
        if getattr(trainer, "use_vllm", False):  # TRL has just synced the policy's weights into its engine
            llm = colocated_backend(trainer.vllm_generation.llm, spec.max_batch_size)
            try:
                return self.roll(keys, self.agent_on(llm), self.batch_seed(trainer))
            finally:
                llm.close()
        net = trainer.accelerator.unwrap_model(trainer.model)
        training = net.training
        net.eval()  # no dropout, no activation checkpointing while generating
        llm = HFLLM(
            net=net, tokenizer=self.tokenizer, max_batch_size=spec.max_batch_size,
            prefix_cache_tokens=spec.prefix_cache_tokens,
        )  # fmt: skip
        try:
            return self.roll(keys, self.agent_on(llm), self.batch_seed(trainer))
        finally:
            llm.close()
            net.train(training)

    def batch_seed(self, trainer: Any) -> int:
        """The seed of this rollout batch: the recipe's seed, the process, the optimizer step and the batch's place
        in that step, so a resumed run samples what the uninterrupted one would have."""
        step = trainer.state.global_step
        nth = self.batches_at[step] = self.batches_at.get(step, -1) + 1
        return derive_seed(self.recipe.seed, trainer.accelerator.process_index, step, nth)

    def roll(self, keys: list[str], agent: Any, seed: int | None = None) -> dict[str, Any]:
        """One conversation per task id in ``keys`` (groups of ``num_generations`` in a row), as TRL's rollout
        output: token ids, the agent-token mask and the environment's reward (``None`` for a skipped one). With
        ``seed``, every conversation samples from its own seed derived from it (``None``: unseeded)."""
        started = time.perf_counter()
        spec = self.recipe.grpo
        seeds = [None if seed is None else derive_seed(seed, i) for i in range(len(keys))]
        conversations = [
            converse(self.env, self.tasks[k], agent, self.user, spec.max_turns, s)
            for k, s in zip(keys, seeds, strict=True)
        ]
        results = run_batch(conversations, [self.user_llm] if self.user_llm is not None else [])
        stop_if_failing(llm for llm in (getattr(agent, "llm", None), self.user_llm) if llm is not None)
        sequences = [
            encode(record, trace, agent, self.tasks[k], self.tokenizer, self.recipe.max_length)
            for k, (record, trace) in zip(keys, results, strict=True)
        ]
        mark_equal_groups(sequences, keys, spec.num_generations, self.stats)
        tally(self.stats, [record for record, _ in results], sequences, started)
        return {
            "prompt_ids": [s.prompt_ids for s in sequences],
            "completion_ids": [s.completion_ids for s in sequences],
            "logprobs": None,
            "env_mask": [s.mask for s in sequences],
            "josh_reward": [s.reward for s in sequences],
        }


def environment_reward(prompts: list[Any], completions: list[Any], josh_reward: list[float | None], **_: Any):
    """The environment's reward of each rollout (``None``: skipped, left out of its group's baseline)."""
    return list(josh_reward)


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import GRPOTrainer  # optional: the train extra

    rollout = ConversationRollout(recipe, tokenizer)
    # rollout_func is experimental in TRL (a notice at the trainer's build); josh pins TRL
    with env_default("TRL_EXPERIMENTAL_SILENCE", "1"), colocated_cpu_engine(recipe):
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[environment_reward],
            args=config(recipe, output_dir),
            train_dataset=to_dataset(rows),
            processing_class=tokenizer,
            peft_config=None if recipe.model.adapter else lora_config(recipe.lora),
            callbacks=callbacks,
            rollout_func=rollout,
        )
    trainer.josh_rollouts = rollout.stats
    trainer.add_callback(rollout_ledger(rollout.stats, lambda n: summed(trainer.accelerator, n)))
    return trainer


def summed(accelerator: Any, n: int) -> int:
    """``n`` summed over the training processes."""
    if accelerator.num_processes == 1:
        return n
    import torch  # optional: the train extra

    return int(accelerator.reduce(torch.tensor([n], device=accelerator.device), reduction="sum").item())
