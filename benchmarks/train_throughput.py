"""Training throughput: `josh train sft` (tiny recipe) vs a plain TRL SFTTrainer script on the same data and model.

Both train the offline SmolLM2 with the same LoRA and trainer arguments on a generated dataset of ReACT and
function-calling conversations; the ratio josh / plain should stay within 10% (josh adds loading checks, the
training template and the metrics callback, never work inside the step).

    python benchmarks/train_throughput.py --rows 8 --steps 4 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
TOOL = {
    "type": "function",
    "function": {
        "name": "find_hotel",
        "description": "Search hotels.",
        "parameters": {"type": "object", "properties": {"area": {"type": "string"}}, "required": ["area"]},
    },
}


def make_rows(n: int) -> list[dict]:
    """Alternating ReACT (text only) and function-calling conversations."""
    rows = []
    for i in range(n):
        area = ["north", "south", "centre", "east"][i % 4]
        user = {"role": "user", "content": f"I need a hotel in the {area}, cheap if possible."}
        if i % 2:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "find_hotel", "arguments": json.dumps({"area": area})},
            }
            messages = [
                {"role": "system", "content": "You book hotels."},
                user,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"name": "alpha lodge", "price": "cheap"}'},
                {"role": "assistant", "content": f"Alpha Lodge in the {area} is cheap. Shall I book it?"},
            ]
            rows.append({"messages": messages, "tools": [TOOL]})
        else:
            messages = [
                {"role": "system", "content": "You book hotels. Think, then act."},
                user,
                {"role": "assistant", "content": f"THOUGHT: search the {area}.\nAPI: find_hotel(area={area})"},
                {"role": "user", "content": "API RESULT: alpha lodge, cheap"},
                {"role": "assistant", "content": "SPEAK: Alpha Lodge is cheap. Shall I book it?"},
            ]
            rows.append({"messages": messages, "tools": []})
    return rows


def run_josh(data: Path, out: Path, steps: int) -> float:
    from josh.recipes import load_recipe
    from josh.training.runner import train

    recipe = load_recipe(
        ROOT / "recipes/tiny-sft.yaml",
        [f"data={data}", f"output_dir={out}", "run_name=josh", f"optim.max_steps={steps}", f"optim.save_steps={steps}"],
    )
    run_dir = train(recipe)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return metrics["tokens"] / metrics["trainer_metrics"]["train_runtime"]


def run_plain(data: Path, out: Path, steps: int) -> float:
    """What a user would write by hand with TRL: same model, template, LoRA and arguments."""
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from josh.llm.models import resolve_model
    from josh.recipes import load_recipe

    recipe = load_recipe(ROOT / "recipes/tiny-sft.yaml")
    path = resolve_model(recipe.model.name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    lora = recipe.lora
    args = SFTConfig(
        output_dir=str(out / "plain"),
        max_steps=steps,
        learning_rate=recipe.optim.learning_rate,
        per_device_train_batch_size=recipe.optim.per_device_batch_size,
        gradient_accumulation_steps=recipe.optim.gradient_accumulation_steps,
        lr_scheduler_type=recipe.optim.lr_scheduler,
        logging_steps=1,
        save_steps=steps,
        report_to="none",
        seed=recipe.seed,
        max_length=recipe.max_length,
        assistant_only_loss=True,
        gradient_checkpointing=False,
        bf16=recipe.optim.bf16,
        include_num_input_tokens_seen="non_padding",
    )
    dataset = load_dataset("json", data_files=str(data), split="train")
    peft_config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config
    )
    result = trainer.train()
    return trainer.state.num_input_tokens_seen / result.metrics["train_runtime"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="alternate the two runs this many times; best of each")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sft.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in make_rows(opts.rows)))
        josh, plain = [], []
        for i in range(opts.repeat):
            plain.append(run_plain(data, Path(tmp) / f"p{i}", opts.steps))
            josh.append(run_josh(data, Path(tmp) / f"j{i}", opts.steps))
    best_josh, best_plain = max(josh), max(plain)
    print(f"plain TRL SFTTrainer : {best_plain:8.1f} tokens/s  (runs: {', '.join(f'{x:.1f}' for x in plain)})")
    print(f"josh train sft       : {best_josh:8.1f} tokens/s  (runs: {', '.join(f'{x:.1f}' for x in josh)})")
    print(f"ratio josh / plain   : {best_josh / best_plain:8.3f}  (target >= 0.90)")


if __name__ == "__main__":
    main()
