"""GRPO training throughput: `josh train grpo` (tiny recipe) vs a plain TRL GRPOTrainer script, same model, tasks,
environment and settings.

Plain TRL has no place for a user simulator's turns, so both sides run the single-turn form of the same rollout: the
agent's system prompt and the user simulator's opening line of a mini ToolWOZ train task as the prompt, one ACT output
as the completion, and the environment's goal reward for the call it makes. The plain script is what a user would
write by hand: the prompts built once up front, TRL's own batched generation, and a reward function that parses the
action and runs it in the environment. josh runs its whole conversation loop (user simulator, agent, environment,
rendering and masks) with `grpo.max_turns=1` and one generation per turn. Both train SmolLM2 with the same LoRA and
GRPO arguments, each in its own subprocess, alternating; tokens/s is the prompt and completion tokens GRPO trained on
over the training runtime (rollouts included), and every figure carries the load average. Target: josh / plain >= 0.9.

    python benchmarks/grpo_throughput.py --steps 2 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/tiny-grpo.yaml"
AGENT_OPTIONS = "grpo.agent_options={examples: 0, max_generations: 1}"


def recipe_for(out: Path, args: argparse.Namespace):
    from josh.training.recipe import load_recipe

    overrides = [
        f"output_dir={out}", "run_name=josh", f"optim.max_steps={args.steps}", f"optim.save_steps={args.steps}",
        f"optim.per_device_train_batch_size={args.batch}", f"grpo.limit={args.tasks}", "grpo.max_turns=1",
        f"grpo.max_new_tokens={args.new_tokens}", AGENT_OPTIONS,
    ]  # fmt: skip
    return load_recipe(RECIPE, overrides)


def run_josh(out: Path, args: argparse.Namespace) -> float:
    from josh.training.runner import train

    run_dir = train(recipe_for(out, args), progress=False)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics["tokens"] / metrics["trainer_metrics"]["train_runtime"]


def plain_prompts(recipe) -> tuple[list[dict], dict]:
    """The prompts a hand-written script feeds TRL: the ACT system prompt and the user's opening line per task."""
    import asyncio

    from josh.agents import make_agent
    from josh.llm.scripted import ScriptedLLM
    from josh.run.components import build_env
    from josh.users import make_user

    spec = recipe.grpo
    env = build_env(spec.env, spec.data)
    tasks = env.tasks(spec.split)[: spec.limit]
    agent = make_agent(spec.agent, env, ScriptedLLM(["(never asked)"]), **spec.agent_options)
    user = make_user(spec.user)
    rows = []
    for task in tasks:
        opening = asyncio.run(user.reply(task, [])).text
        prompt = [{"role": "system", "content": agent.system_prompt(task)}, {"role": "user", "content": opening}]
        rows.append({"prompt": prompt, "task_id": task.id})
    return rows, {"env": env, "tasks": {t.id: t for t in tasks}}


def run_plain(out: Path, args: argparse.Namespace) -> float:
    """The hand-written TRL script: same model, LoRA, GRPO arguments, tasks and environment reward."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from josh.agents.act import parse_act
    from josh.llm.models import resolve_model

    recipe = recipe_for(out, args)
    rows, world = plain_prompts(recipe)
    env, tasks = world["env"], world["tasks"]

    def goal_reward(prompts, completions, task_id, **_):
        rewards = []
        for completion, key in zip(completions, task_id, strict=True):
            parsed = parse_act(completion[0]["content"])
            state = env.reset(tasks[key])
            for read in parsed.calls:
                if read.ok:
                    env.call(state, read.call)
            rewards.append(env.reward(state, []))
        return rewards

    path = resolve_model(recipe.model.name)
    spec, opt, lora = recipe.grpo, recipe.optim, recipe.lora
    config = GRPOConfig(
        output_dir=str(out / "plain"), max_steps=args.steps, learning_rate=opt.learning_rate,
        per_device_train_batch_size=opt.per_device_batch_size,
        gradient_accumulation_steps=opt.gradient_accumulation_steps, lr_scheduler_type=opt.lr_scheduler,
        logging_steps=1, save_steps=args.steps, report_to="none", seed=recipe.seed,
        gradient_checkpointing=opt.gradient_checkpointing, bf16=opt.bf16, num_generations=spec.num_generations,
        max_completion_length=spec.max_new_tokens, temperature=spec.temperature, beta=spec.beta,
        loss_type=spec.loss_type, scale_rewards=spec.scale_rewards,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path, dtype=recipe.model.dtype),
        reward_funcs=goal_reward,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(path),
        peft_config=LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                               target_modules=lora.target_modules, task_type="CAUSAL_LM"),
    )  # fmt: skip
    result = trainer.train()
    return trainer.state.num_input_tokens_seen / result.metrics["train_runtime"]


def measure(kind: str, out: Path, args: argparse.Namespace) -> float:
    """One run in a fresh interpreter; prints and returns its tokens/s."""
    flags = ["--steps", str(args.steps), "--batch", str(args.batch), "--tasks", str(args.tasks)]
    flags += ["--new-tokens", str(args.new_tokens)]
    cmd = [sys.executable, __file__, "--child", kind, "--out", str(out / kind), *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        sys.exit(f"the {kind} run failed:\n{done.stderr[-3000:]}")
    speed = float(done.stdout.strip().splitlines()[-1])
    print(f"  {kind:5s}  {speed:7.1f} tokens/s  load {os.getloadavg()[0]:.2f}", flush=True)
    return speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per run (one generation batch each)")
    parser.add_argument("--batch", type=int, default=4, help="conversations per step (2 per task)")
    parser.add_argument("--tasks", type=int, default=8, help="mini ToolWOZ train tasks")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens per agent output")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the two runs this many times")
    parser.add_argument("--child", choices=["josh", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print((run_josh if args.child == "josh" else run_plain)(args.out, args))
        return
    print(f"GRPO on SmolLM2, {args.steps} steps x {args.batch} single-turn rollouts, {args.new_tokens} new tokens")
    runs: dict[str, list[float]] = {"plain": [], "josh": []}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for kind in ("plain", "josh"):
                runs[kind].append(measure(kind, Path(tmp) / f"{i}", args))
                loads.append(os.getloadavg()[0])
    best = {k: max(v) for k, v in runs.items()}
    print(f"plain TRL GRPOTrainer : {best['plain']:8.1f} tokens/s (best of {args.repeat})")
    print(f"josh train grpo       : {best['josh']:8.1f} tokens/s")
    print(f"ratio josh / plain    : {best['josh'] / best['plain']:8.3f} (target >= 0.90)")
    print(f"load average (1 min) during the runs: {min(loads):.2f} to {max(loads):.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
