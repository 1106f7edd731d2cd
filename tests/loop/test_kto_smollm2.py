"""KTO on the SFT policy with real models: SmolLM2 SFT adapter → merged full model → a KTO adapter trained on it
with TRL → evaluated through the hf backend. One optimiser step each (SFT on one row, KTO on one batch of two); the
demo and the science recipe measure quality, this test the plumbing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from josh.loop.arms.warm_start import warm_rows
from josh.loop.recipe import load_loop_recipe
from josh.loop.runner import Loop

ROOT = Path(__file__).resolve().parents[2]


def kto_rows(sft: Path, out: Path) -> Path:
    """Good/bad first agent turns made from warm-start conversations."""
    rows = []
    for line in sft.read_text().splitlines()[:2]:
        row = json.loads(line)
        first = next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
        prompt, good = row["messages"][:first], row["messages"][first]
        rows.append({"prompt": prompt, "completion": [good], "label": True, "tools": row["tools"]})
        bad = {"role": "assistant", "content": "Sorry, I cannot help."}
        rows.append({"prompt": prompt, "completion": [bad], "label": False, "tools": row["tools"]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


@pytest.mark.slow
def test_kto_trains_on_the_merged_sft_policy(tmp_path: Path) -> None:
    recipe = load_loop_recipe(
        ROOT / "recipes" / "demo-cpu.yaml",
        [
            f"output_dir={tmp_path}", "kto_from=sft", "warm_start.tasks=2", "warm_start.max_turns=1",
            "eval.limit=1", "eval.max_turns=1", "eval.sampling.max_new_tokens=16", "sft.optim.max_steps=1",
            "sft.optim.per_device_train_batch_size=1", "sft.max_length=768", "kto.method=kto", "kto.max_length=768",
            "kto.model.dtype=float32", "kto.optim.max_steps=1", "kto.optim.per_device_train_batch_size=2", "kto.lora.target_modules=[q_proj, v_proj]",
        ],
    )  # fmt: skip
    loop = Loop(recipe, progress=False)
    warm = warm_rows(loop, recipe.warm_start)
    sft = loop.train("sft", tmp_path / "sft", recipe.sft, [warm], "sft")
    merged = loop.merge("merge", sft, tmp_path / "merged", "float32")
    assert (merged / "model.safetensors").is_file() and not (merged / "adapter_config.json").exists()
    data = kto_rows(warm, tmp_path / "kto.jsonl")
    kto = loop.train("kto", tmp_path / "kto", recipe.kto, [data], "kto", base=merged)
    assert kto is not None, (tmp_path / "kto" / "ended.txt").read_text()
    config = json.loads((kto / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(merged.resolve())
    assert json.loads((kto / "metrics.json").read_text())["global_step"] == 1
    loop.evaluate("kto", 1, tmp_path / "eval", kto, "JOSH-SFT+KTO")
    records = (tmp_path / "eval" / "results.jsonl").read_text().splitlines()
    assert len(records) == 1 and json.loads(records[0])["llm_calls"] >= 1
