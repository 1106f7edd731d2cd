"""Training throughput and peak memory: `josh train sft` (tiny recipe) vs a plain TRL SFTTrainer script.

Both train the offline SmolLM2 with the same LoRA and trainer arguments on the same rows, which josh makes
itself: its warm-start generator rewrites scripted oracle conversations on the bundled mini ToolWOZ set in the
chosen agent's protocol (the demo's warm-start data). Every run trains in its own subprocess, so its peak memory
is its own: resident memory (ru_maxrss) on CPU, ``torch.cuda.max_memory_allocated`` on a GPU. Josh and plain
runs alternate and every figure carries the load average. Targets: josh / plain peak memory <= 1.0 and
tokens/s >= 0.9.

    python benchmarks/train_throughput.py --steps 3 --repeat 2
    python benchmarks/train_throughput.py --set optim.gradient_checkpointing=false   # both store activations
    python benchmarks/train_throughput.py --agent react --max-turns 15   # longer rows (~1.4k tokens)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/tiny-sft.yaml"


def make_rows(folder: Path, agent: str, tasks: int, max_turns: int) -> Path:
    """Warm-start SFT rows for ``agent`` from scripted conversations on the mini set's train tasks."""
    from josh.agents import make_agent
    from josh.harvest.warmstart import WarmStartConfig, warm_start
    from josh.llm.scripted import ScriptedLLM
    from josh.run.components import build_env

    env = build_env("toolwoz", "mini")
    options = {"examples": 0, "max_generations": 2} if agent == "act" else {}
    prompted = make_agent(agent, env, ScriptedLLM(["(never asked)"]), **options)
    config = WarmStartConfig(tasks=tasks, max_turns=max_turns, min_reward=0.0)
    stats = warm_start(env, env.tasks("train"), prompted, folder, config)
    print(f"rows: {stats.rows} warm-start {agent} conversations (max {max_turns} turns) on the mini ToolWOZ set")
    return folder / "sft.jsonl"


def run_josh(data: Path, out: Path, steps: int, extra: list[str]) -> float:
    from josh.training.recipe import load_recipe
    from josh.training.runner import train

    overrides = [f"data={data}", f"output_dir={out}", "run_name=josh", f"optim.max_steps={steps}"]
    run_dir = train(load_recipe(RECIPE, [*overrides, f"optim.save_steps={steps}", *extra]))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics["tokens"] / metrics["trainer_metrics"]["train_runtime"]


def run_plain(data: Path, out: Path, steps: int, extra: list[str]) -> float:
    """What a user would write by hand with TRL: same model, template, LoRA and arguments."""
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from josh.llm.models import resolve_model
    from josh.training.recipe import load_recipe

    recipe = load_recipe(RECIPE, extra)
    path = resolve_model(recipe.model.name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=recipe.model.dtype)
    args = SFTConfig(
        output_dir=str(out / "plain"),
        max_steps=steps,
        learning_rate=recipe.optim.learning_rate,
        per_device_train_batch_size=recipe.optim.per_device_train_batch_size,
        gradient_accumulation_steps=recipe.optim.gradient_accumulation_steps,
        lr_scheduler_type=recipe.optim.lr_scheduler_type,
        logging_steps=1,
        save_steps=steps,
        report_to="none",
        seed=recipe.seed,
        max_length=recipe.max_length,
        assistant_only_loss=True,
        gradient_checkpointing=recipe.optim.gradient_checkpointing,
        bf16=recipe.optim.bf16,
        use_liger_kernel=recipe.optim.use_liger_kernel,
        include_num_input_tokens_seen="non_padding",
    )
    lora = recipe.lora
    peft_config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )  # fmt: skip
    dataset = load_dataset("json", data_files=str(data), split="train")
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config
    )
    result = trainer.train()
    return trainer.state.num_input_tokens_seen / result.metrics["train_runtime"]


def child(kind: str, data: Path, out: Path, steps: int, extra: list[str]) -> None:
    """One training run; prints its tokens/s and peak memory as the last line (JSON)."""
    import torch

    speed = (run_josh if kind == "josh" else run_plain)(data, out, steps, extra)
    if torch.cuda.is_available():
        peak, measure = torch.cuda.max_memory_allocated() / 2**20, "torch.cuda.max_memory_allocated"
    else:
        peak, measure = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "peak resident memory"
    print(json.dumps({"tokens_per_s": speed, "peak_mib": peak, "measure": measure}))


def measure(kind: str, data: Path, out: Path, steps: int, extra: list[str]) -> dict:
    """Run ``child`` in a fresh interpreter (its own memory peak) and read its result line."""
    cmd = [sys.executable, __file__, "--child", kind, "--data", str(data), "--out", str(out), "--steps", str(steps)]
    done = subprocess.run([*cmd, *(f"--set={o}" for o in extra)], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the {kind} run failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    load = os.getloadavg()
    print(f"  {kind:5s}  {result['tokens_per_s']:7.1f} tokens/s  {result['peak_mib']:7.0f} MiB  load {load[0]:.2f}")
    return {**result, "load": load[0]}


def report(runs: dict[str, list[dict]]) -> None:
    ours, plain = runs["josh"], runs["plain"]
    speed = {k: max(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_mib"] for r in v) for k, v in runs.items()}
    load = [r["load"] for r in ours + plain]
    print(f"memory: {ours[0]['measure']}; best tokens/s and highest peak of each side")
    print(f"plain TRL SFTTrainer : {speed['plain']:8.1f} tokens/s  {peak['plain']:7.0f} MiB peak")
    print(f"josh train sft       : {speed['josh']:8.1f} tokens/s  {peak['josh']:7.0f} MiB peak")
    print(f"ratio josh / plain   : {speed['josh'] / speed['plain']:8.3f} tokens/s (target >= 0.90)")
    print(f"                       {peak['josh'] / peak['plain']:8.3f} peak memory (target <= 1.00)")
    print(f"load average (1 min) during the runs: {min(load):.2f} to {max(load):.2f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="act", help="protocol of the rows: act (the demo's), react, ...")
    parser.add_argument("--tasks", type=int, default=24, help="warm-start train tasks (one row each)")
    parser.add_argument("--max-turns", type=int, default=2, help="conversation horizon (the demo uses 2)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="alternate the two runs this many times")
    parser.add_argument(
        "--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
        help="recipe override for both sides: optim.gradient_checkpointing=false, optim.use_liger_kernel=true (CUDA)",
    )  # fmt: skip
    parser.add_argument("--child", choices=["josh", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts.child, opts.data, opts.out, opts.steps, opts.extra)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = make_rows(Path(tmp) / "rows", opts.agent, opts.tasks, opts.max_turns)
        print(f"settings: {RECIPE.name} {' '.join(opts.extra) or '(as shipped)'}, {opts.steps} steps")
        runs: dict[str, list[dict]] = {"plain": [], "josh": []}
        for i in range(opts.repeat):
            for kind in ("plain", "josh"):
                runs[kind].append(measure(kind, data, Path(tmp) / f"{kind}{i}", opts.steps, opts.extra))
    report(runs)


if __name__ == "__main__":
    main()
