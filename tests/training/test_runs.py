"""Training on the offline SmolLM2: assistant-only loss masks, tiny SFT (+ resume) and KTO runs (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from josh.training.recipe import load_recipe
from tests.training_data import kto_rows, react_conversation, tool_conversation, write_jsonl

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FAST = ["max_length=256", "optim.logging_steps=1", "optim.gradient_accumulation_steps=1"]


def recipe_for(name: str, tmp_path: Path, data: Path, *extra: str):
    overrides = [*FAST, f"data={data}", f"output_dir={tmp_path}", *extra]
    return load_recipe(ROOT / f"recipes/{name}.yaml", overrides)


def supervised_spans(labels: list[int]) -> list[list[int]]:
    spans: list[list[int]] = []
    previous = False
    for token in labels:
        supervised = token != -100
        if supervised and previous:
            spans[-1].append(token)
        elif supervised:
            spans.append([token])
        previous = supervised
    return spans


@pytest.mark.parametrize("kind", ["react", "tools", "trl"])
def test_only_assistant_tokens_carry_loss(kind, tiny_smollm2, tmp_path):
    """``trl``: the conversation as ``josh extract`` writes it (arguments as an object, tool results named). The
    labels are SmolLM2's tokenizer and template at work: the two-layer ``tiny_smollm2`` carries both, and the tests
    below train the real 135M model."""
    from josh.harvest.trl_rows import trl_messages
    from josh.training.data import read_rows
    from josh.training.model import load_model, load_tokenizer
    from josh.training.sft import build_trainer
    from josh.types import Message
    from tests.training_data import FIND_TOOL

    convo = react_conversation("chinese") if kind == "react" else tool_conversation("chinese")
    if kind == "trl":
        convo = trl_messages(Message.from_openai(m) for m in convo)
        assert isinstance(convo[2]["tool_calls"][0]["function"]["arguments"], dict) and convo[3]["name"]
    row = {"messages": convo, "tools": [FIND_TOOL] if kind != "react" else []}
    recipe = recipe_for("tiny-sft", tmp_path, write_jsonl(tmp_path / "d.jsonl", [row]), f"model.name={tiny_smollm2}")
    rows = read_rows(recipe.data, "sft")
    tokenizer = load_tokenizer(recipe, need_masks=True)
    trainer = build_trainer(recipe, rows, load_model(recipe), tokenizer, tmp_path / "run", [])
    batch = trainer.data_collator([trainer.train_dataset[0]])
    labels = batch["labels"][0].tolist()
    spans = [tokenizer.decode(s) for s in supervised_spans(labels)]
    if kind == "react":
        expected = [m["content"] + "<|im_end|>" for m in convo if m["role"] == "assistant"]
    else:
        args = convo[2]["tool_calls"][0]["function"]["arguments"]
        args = args if isinstance(args, str) else json.dumps(args)
        call = '<tool_call>\n{"name": "find_restaurant", "arguments": ' + args + "}\n</tool_call>"
        expected = [call + "<|im_end|>", convo[4]["content"] + "<|im_end|>"]
    assert spans == expected
    masked = tokenizer.decode([t for t, lab in zip(batch["input_ids"][0].tolist(), labels, strict=True) if lab == -100])
    for message in convo:
        if message["role"] != "assistant":
            assert message["content"] in masked


def test_tiny_sft_lowers_loss_saves_a_loadable_adapter_and_resumes(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from josh.llm.models import resolve_model
    from josh.training.runner import RunExistsError, prepare, train

    data = write_jsonl(tmp_path / "sft.jsonl", [{"messages": react_conversation("chinese")}] * 4)
    steps = ["optim.max_steps=2", "optim.save_steps=2", "optim.learning_rate=2e-3"]
    run_dir = train(recipe_for("tiny-sft", tmp_path, data, *steps))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    losses = [entry["loss"] for entry in metrics["loss_curve"]]
    assert len(losses) == 2 and losses[-1] < losses[0]
    assert metrics["tokens"] > 0 and metrics["tokens_per_second"] > 0
    config = json.loads((run_dir / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "smollm2"
    assert "generation" in (run_dir / "chat_template.jinja").read_text()
    assert "max_steps: 2" in (run_dir / "recipe.yaml").read_text()
    base = AutoModelForCausalLM.from_pretrained(resolve_model(config["base_model_name_or_path"]))
    assert isinstance(PeftModel.from_pretrained(base, run_dir), PeftModel)

    again = recipe_for("tiny-sft", tmp_path, data, *steps[1:], "optim.max_steps=3")
    with pytest.raises(RunExistsError):
        prepare(again, resume=False)
    train(again, resume=True)
    resumed = json.loads((run_dir / "metrics.json").read_text())
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["global_step"] == 3
    assert [e["step"] for e in resumed["loss_curve"]] == [3]


def test_sft_continues_a_trained_adapter(tmp_path):
    from safetensors.torch import load_file

    from josh.training.model import ModelNotFoundError
    from josh.training.runner import train

    data = write_jsonl(tmp_path / "sft.jsonl", [{"messages": react_conversation("chinese")}] * 2)
    first = train(
        recipe_for(
            "tiny-sft", tmp_path, data, "optim.num_train_epochs=1", "optim.min_steps=2", "optim.learning_rate=2e-3"
        )
    )
    assert json.loads((first / "metrics.json").read_text())["global_step"] == 2, "1 epoch of 2 rows is 1 step"
    assert "max_steps: 2" in (first / "recipe.yaml").read_text()
    start = load_file(first / "adapter_model.safetensors")
    assert any(name.endswith("lora_B.weight") and w.abs().sum() > 0 for name, w in start.items())
    frozen = ["optim.max_steps=1", "optim.learning_rate=1e-12", "run_name=continued", f"model.adapter={first}"]
    continued = train(recipe_for("tiny-sft", tmp_path, data, *frozen))
    after = load_file(continued / "adapter_model.safetensors")
    assert after.keys() == start.keys()
    assert all(torch_allclose(after[k], start[k]) for k in start), "a fresh adapter would have zero lora_B weights"
    with pytest.raises(ModelNotFoundError, match="not a PEFT adapter"):
        train(recipe_for("tiny-sft", tmp_path, data, "run_name=bad", f"model.adapter={tmp_path}"))


def torch_allclose(a, b) -> bool:
    import torch

    return torch.allclose(a.float(), b.float(), atol=1e-6)


def test_tiny_kto_lowers_loss_and_saves_an_adapter(tmp_path):
    from josh.training.runner import train

    data = write_jsonl(tmp_path / "kto.jsonl", kto_rows(4, tools=False))
    recipe = recipe_for("tiny-kto", tmp_path, data, "optim.max_steps=3", "optim.learning_rate=2e-3")
    run_dir = train(recipe)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    losses = [entry["loss"] for entry in metrics["loss_curve"]]
    assert losses[-1] < losses[0]
    assert (run_dir / "adapter_model.safetensors").is_file()
