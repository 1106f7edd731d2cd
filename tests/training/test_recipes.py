"""Recipe validation, --set overrides, dataset checks and entry points (fast: no model is loaded)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.training.data import DatasetError, normalise_message, read_rows
from josh.training.kto import balanced_weights, validate
from josh.training.recipe import RecipeError, build_recipe, load_recipe
from josh.util.jsonl import skipping_bad_lines
from tests.training_data import FIND_TOOL, dpo_rows, kto_rows, sft_rows, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
# Training recipes name their method; loop recipes (rounds of rollouts, training, eval) are tested with the loop.
RECIPES = [p for p in sorted((ROOT / "recipes").glob("*.yaml")) if "method" in yaml.safe_load(p.read_text())]


def test_typo_names_the_key_and_the_closest_valid_one():
    with pytest.raises(RecipeError) as err:
        build_recipe({"optim": {"lerning_rate": 1e-4}})
    assert "optim.lerning_rate" in str(err.value)
    assert "optim.learning_rate" in str(err.value)


def test_top_level_typo_is_reported():
    with pytest.raises(RecipeError, match="'max_lenght'.*'max_length'"):
        build_recipe({"max_lenght": 10})


def test_set_coerces_types_through_pydantic():
    recipe = build_recipe(
        {},
        [
            "optim.learning_rate=1e-4",
            "optim.num_train_epochs=3",
            "lora.target_modules=[q_proj, v_proj]",
            "optim.bf16=true",
        ],
    )
    assert recipe.optim.learning_rate == pytest.approx(1e-4)
    assert recipe.optim.num_train_epochs == 3.0 and isinstance(recipe.optim.num_train_epochs, float)
    assert recipe.lora.target_modules == ["q_proj", "v_proj"]
    assert recipe.optim.bf16 is True


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("optim.per_device_train_batch_size=abc", "optim.per_device_train_batch_size"),
        ("lora.rank=8", "did you mean 'lora.r'"),
        ("no_equals_sign", "expected key=value"),
        ("seed.value=1", "seed: Input should be a valid integer"),
    ],
)
def test_bad_overrides_fail_with_a_clear_message(override, needle):
    with pytest.raises(RecipeError, match=re.escape(needle)):
        build_recipe({}, [override])


def test_4bit_needs_lora():
    with pytest.raises(RecipeError, match="load_in_4bit"):
        build_recipe({"quantization": {"load_in_4bit": True}, "lora": {"enabled": False}})


@given(
    rows=st.integers(1, 200),
    batch=st.integers(1, 8),
    accumulate=st.integers(1, 4),
    epochs=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
    min_steps=st.integers(0, 60),
)
def test_min_steps_raises_short_runs_only(rows, batch, accumulate, epochs, min_steps):
    from josh.training.config import optimizer_steps, with_min_steps

    optim = {
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": accumulate,
        "num_train_epochs": epochs,
    }
    recipe = build_recipe({"optim": {**optim, "min_steps": min_steps}})
    steps = optimizer_steps(recipe, rows)
    assert steps >= 1 and steps == optimizer_steps(build_recipe({"optim": optim}), rows)
    raised = with_min_steps(recipe, rows)
    if steps >= min_steps:
        assert raised is recipe
    else:
        assert raised.optim.max_steps == min_steps and raised.optim.min_steps == 0


def test_min_steps_counts_like_the_trainer():
    from josh.training.config import optimizer_steps

    recipe = build_recipe(
        {"optim": {"num_train_epochs": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1}}
    )
    assert [optimizer_steps(recipe, n) for n in (6, 7, 1)] == [6, 8, 2]
    assert optimizer_steps(recipe, 8, processes=2) == 4


def test_min_steps_needs_a_data_file_and_no_max_steps():
    with pytest.raises(RecipeError, match="min_steps"):
        build_recipe({"optim": {"min_steps": 10, "max_steps": 5}})
    with pytest.raises(RecipeError, match="min_steps"):
        build_recipe({"method": "grpo", "optim": {"min_steps": 10}})


def test_continuing_an_adapter_is_sft_with_lora_only():
    assert build_recipe({"model": {"adapter": "runs/x/train"}}).model.adapter == "runs/x/train"
    with pytest.raises(RecipeError, match="model.adapter"):
        build_recipe({"method": "kto", "model": {"adapter": "runs/x/train"}})
    with pytest.raises(RecipeError, match="model.adapter"):
        build_recipe({"model": {"adapter": "runs/x/train"}, "lora": {"enabled": False}})


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_shipped_recipes_are_valid(path):
    recipe = load_recipe(path)
    assert recipe.method in path.name


def test_paper_recipes_carry_the_paper_settings():
    sft = load_recipe(ROOT / "recipes/llama3-8b-josh-sft.yaml")
    kto = load_recipe(ROOT / "recipes/llama3-8b-josh-kto.yaml")
    assert (sft.optim.num_train_epochs, sft.optim.learning_rate) == (3, 2e-5)
    assert (kto.optim.num_train_epochs, kto.optim.learning_rate, kto.kto.beta) == (1, 5e-7, 0.1)
    paper = load_recipe(ROOT / "recipes/toolwoz-paper-kto-8b.yaml")  # finetune/kto_ft.py on the imported rows
    assert (paper.optim.num_train_epochs, paper.optim.learning_rate, paper.kto.beta) == (1, 5e-7, 0.1)
    assert (paper.kto.desirable_weight, paper.kto.undesirable_weight, paper.max_length) == (1.0, 2.71, 5256)
    assert (paper.optim.warmup_steps, paper.optim.lr_scheduler_type, paper.optim.optim) == (0.1, "cosine", "adamw_8bit")
    for recipe in (sft, kto, paper):
        assert (recipe.lora.r, recipe.lora.alpha, recipe.lora.dropout) == (64, 64, 0.05)
        assert recipe.quantization.load_in_4bit and recipe.quantization.quant_type == "nf4"
        effective = recipe.optim.per_device_train_batch_size * recipe.optim.gradient_accumulation_steps
        assert effective == 16


def test_balanced_kto_weights_equalise_both_sides():
    dw, uw = balanced_weights(build_recipe({}).kto, desirable=30, undesirable=10)
    assert dw * 30 == pytest.approx(uw * 10)
    dw, uw = balanced_weights(build_recipe({"kto": {"undesirable_weight": 2.71}}).kto, 10, 10)
    assert uw == 2.71 and dw == pytest.approx(2.71)


def test_kto_rejects_batch_of_one():
    with pytest.raises(RecipeError, match="per_device_train_batch_size >= 2"):
        validate(build_recipe({"optim": {"per_device_train_batch_size": 1}}), [{}] * 4)


def test_dataset_errors(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        read_rows(tmp_path / "missing.jsonl", "sft")
    with pytest.raises(DatasetError, match="no rows"):
        read_rows(write_jsonl(tmp_path / "empty.jsonl", []), "sft")
    only_good = [r for r in kto_rows(6) if r["label"]]
    with pytest.raises(DatasetError, match="no undesirable"):
        read_rows(write_jsonl(tmp_path / "good.jsonl", only_good), "kto")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(sft_rows(1)[0]) + "\n{not json\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl: line 2 is not a valid"):
        read_rows(bad, "sft")
    with skipping_bad_lines() as skipped:  # josh train --skip-bad-lines
        assert len(read_rows(bad, "sft")) == 1
    assert list(skipped) == [(str(bad), 2)]
    with pytest.raises(DatasetError, match="missing chosen, rejected"):
        read_rows(write_jsonl(tmp_path / "kto_as_dpo.jsonl", [{"prompt": [{"role": "user", "content": "hi"}]}]), "dpo")


def test_rows_share_one_arrow_schema(tmp_path):
    rows = read_rows(write_jsonl(tmp_path / "sft.jsonl", sft_rows(4)), "sft")
    from josh.training.data import to_dataset

    dataset = to_dataset(rows)
    assert json.loads(dataset[1]["tools"]) == [FIND_TOOL]
    assert dataset[0]["tools"] is None
    assert dpo_rows(1)[0]["chosen"][0]["role"] == "assistant"


arguments = st.dictionaries(
    st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.booleans())
)


@given(arguments)
def test_arguments_render_like_the_template_tojson(args):
    as_dict = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": args}}]}
    as_text = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": json.dumps(args)}}]}
    canonical = json.dumps(args, ensure_ascii=False)
    for message in (as_dict, as_text):
        assert normalise_message(message)["tool_calls"][0]["function"]["arguments"] == canonical


def test_unparseable_arguments_are_kept_verbatim():
    message = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{broken"}}]}
    assert normalise_message(message)["tool_calls"][0]["function"]["arguments"] == "{broken"


def test_cli_reports_input_errors_before_training(tmp_path):
    from josh.cli.main import app

    runner = CliRunner()
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({"method": "sft", "optim": {"epoch": 1}}))
    result = runner.invoke(app, ["train", "sft", "--recipe", str(typo), "--data", "x.jsonl"])
    assert result.exit_code == 2 and "optim.num_train_epochs" in result.output
    only_bad = write_jsonl(tmp_path / "bad.jsonl", [r for r in kto_rows(4) if not r["label"]])
    args = ["train", "kto", "--recipe", str(ROOT / "recipes/tiny-kto.yaml"), "--data", str(only_bad)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "no desirable" in result.output
    result = runner.invoke(app, ["train", "sft", "--recipe", str(ROOT / "recipes/tiny-kto.yaml")])
    assert result.exit_code == 2 and "josh train kto" in result.output
    data = write_jsonl(tmp_path / "sft.jsonl", sft_rows(2))
    args = ["train", "sft", "-r", str(ROOT / "recipes/tiny-sft.yaml"), "--data", str(data)]
    result = runner.invoke(app, [*args, "--set", "model.name=/no/such/model"])
    assert result.exit_code == 2 and "model folder not found" in result.output


def test_accelerate_entry_point_parses():
    out = subprocess.run(
        [sys.executable, "-m", "josh.training", "kto", "--help"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "--recipe" in out.stdout and "--resume" in out.stdout


@pytest.mark.parametrize(
    "path", ["accelerate_config.yaml", *sorted(p.name for p in (ROOT / "training").glob("*.yaml"))]
)
def test_accelerate_configs_load(path):
    from accelerate.commands.config.config_args import load_config_from_file

    full = ROOT / path if (ROOT / path).is_file() else ROOT / "training" / path
    config = load_config_from_file(str(full))
    assert config.num_processes >= 1


STOCK_LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def test_llama3_training_template_matches_the_stock_one_without_tools():
    from transformers import AutoTokenizer

    from josh.llm.models import resolve_model
    from josh.training.model import training_template
    from tests.training_data import react_conversation, tool_conversation

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    tokenizer.chat_template = STOCK_LLAMA3
    ours = training_template(tokenizer)
    assert ours is not None and "{%- generation -%}" in ours
    convo = react_conversation("thai")
    for prefix in (convo[:2], convo):
        render = {"tokenize": False, "add_generation_prompt": prefix is not convo}
        stock = tokenizer.apply_chat_template(prefix, **render)
        assert tokenizer.apply_chat_template(prefix, chat_template=ours, **render) == stock
    with_tools = tokenizer.apply_chat_template(
        tool_conversation("thai"), tools=[FIND_TOOL], chat_template=ours, tokenize=False
    )
    assert '"name": "find_restaurant"' in with_tools and "<|start_header_id|>ipython" in with_tools
