"""The tree arm: advantage rows are checked and weighted before any model loads (fast); on the offline SmolLM2 the
advantage-weighted loss masks everything but the turn's assistant tokens, goes down, and saves a loadable adapter
(slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from josh.training.data import DatasetError, normalise_row, read_rows
from josh.training.recipe import RecipeError, load_recipe
from josh.training.tree import weighted_rows
from tests.training_data import write_jsonl

ROOT = Path(__file__).resolve().parents[2]
PROMPT = [
    {"role": "system", "content": "You are a booking agent. Think, then act."},
    {"role": "user", "content": "I want chinese food in the centre."},
]
GOOD = [
    {"role": "assistant", "content": "APICALL find_restaurant(food=chinese)"},
    {"role": "user", "content": "Observation: golden house"},
    {"role": "assistant", "content": "SPEAK Golden House serves chinese food."},
]
BAD = [{"role": "assistant", "content": "SPEAK Sorry, I cannot help with that."}]


def tree_rows(advantages: tuple[float, float] = (0.5, -0.5)) -> list[dict]:
    return [
        {"prompt": PROMPT, "completion": GOOD, "advantage": advantages[0], "group": "t#0"},
        {"prompt": PROMPT, "completion": BAD, "advantage": advantages[1], "group": "t#0"},
    ]


def recipe_for(tmp_path: Path, data: Path, *extra: str):
    fast = ["max_length=256", f"data={data}", f"output_dir={tmp_path}"]
    return load_recipe(ROOT / "recipes/tiny-tree.yaml", [*fast, *extra])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"advantage": "high"}, "finite number"),
        ({"advantage": float("nan")}, "finite"),
        ({"advantage": None}, "finite number"),
    ],
)
def test_bad_advantages_are_refused(change: dict, message: str) -> None:
    row = {**tree_rows()[0], **change}
    with pytest.raises(TypeError, match=message):
        normalise_row(row, "tree")
    missing = {k: v for k, v in tree_rows()[0].items() if k != "advantage"}
    with pytest.raises(TypeError, match="missing advantage"):
        normalise_row(missing, "tree")


def test_negative_weight_scales_negatives_and_zero_rows_are_counted(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "tree.jsonl", [*tree_rows(), *tree_rows((0.0, 0.0))])
    rows = read_rows(data, "tree")
    kept, zero = weighted_rows(recipe_for(tmp_path, data), rows)
    assert [r["advantage"] for r in kept] == [0.5, -0.5] and zero == 2
    kept, zero = weighted_rows(recipe_for(tmp_path, data, "tree.negative_weight=0.5"), rows)
    assert [r["advantage"] for r in kept] == [0.5, -0.25]
    with pytest.raises(DatasetError, match="nothing to learn"):
        weighted_rows(recipe_for(tmp_path, data, "tree.negative_weight=0"), read_rows(data, "tree")[1:])


def test_tree_recipe_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="negative_weight"):
        recipe_for(tmp_path, tmp_path, "tree.negative_weight=-1")
    assert recipe_for(tmp_path, tmp_path, f"model.adapter={tmp_path}").model.adapter == str(tmp_path)


@pytest.mark.slow
def test_only_the_turns_assistant_tokens_carry_weighted_loss(tiny_smollm2: Path, tmp_path: Path) -> None:
    """The rows' labels and advantages: SmolLM2's tokenizer and template on the two-layer ``tiny_smollm2`` (the run
    below trains the real 135M model)."""
    from josh.training.model import load_model, load_tokenizer
    from josh.training.tree import build_trainer

    data = write_jsonl(tmp_path / "tree.jsonl", tree_rows())
    recipe = recipe_for(tmp_path, data, f"model.name={tiny_smollm2}")
    tokenizer = load_tokenizer(recipe, need_masks=True)
    trainer = build_trainer(recipe, read_rows(data, "tree"), load_model(recipe), tokenizer, tmp_path / "run", [])
    batch = trainer.data_collator([trainer.train_dataset[0], trainer.train_dataset[1]])
    assert batch["advantage"].tolist() == [0.5, -0.5]
    labelled = [
        tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
        for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True)
    ]
    assert labelled[0] == GOOD[0]["content"] + "<|im_end|>" + GOOD[2]["content"] + "<|im_end|>"  # not the observation
    assert labelled[1] == BAD[0]["content"] + "<|im_end|>"


@pytest.mark.slow
def test_tiny_tree_run_lowers_its_loss_and_saves_a_loadable_adapter(tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from josh.llm.models import resolve_model
    from josh.training.runner import train

    data = write_jsonl(tmp_path / "tree.jsonl", tree_rows() * 2)
    run_dir = train(recipe_for(tmp_path, data, "optim.max_steps=3", "optim.learning_rate=2e-3"), progress=False)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    losses = [entry["loss"] for entry in metrics["loss_curve"]]
    assert len(losses) == 3 and losses[-1] < losses[0]
    assert metrics["method"] == "tree" and metrics["rows"] == 4
    config = json.loads((run_dir / "adapter_config.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(resolve_model(config["base_model_name_or_path"]))
    assert isinstance(PeftModel.from_pretrained(base, run_dir), PeftModel)
