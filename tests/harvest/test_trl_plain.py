"""The rows ``josh extract`` writes train with plain TRL: ``load_dataset("json")`` and TRL's own SFT, KTO and DPO
trainers, as a TRL user's script would run them, with no josh training code.

What is tested is the data, so the model is SmolLM2's tokenizer and chat template (which render the tool calls
and the tools column) over the session's two-layer model of SmolLM2's architecture (``tiny_smollm2``, random
weights; the 135M weights cost minutes on two cores and test nothing about the rows). Slow: each trainer builds its own tokenised dataset, and KTO
and DPO their reference model, then takes one optimiser step (max_length 256, batch 2, fp32).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from josh.harvest.extract import extract
from josh.search.algorithm import SearchConfig, search
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    """``extract`` on three searched trees of the table-driven fakes: SFT, both KTO labels and DPO pairs."""

    async def grow(task_id: str):
        agent = TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})
        return await search(make_task(2, task_id), FakeEnv(), agent, TableUser(), SearchConfig())

    run = tmp_path_factory.mktemp("run")
    trees = [asyncio.run(grow(t)) for t in ("a", "b", "c")]
    (run / "trees.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trees))
    extract(run, run / "data")
    return run / "data"


@pytest.fixture(scope="module")
def smollm2(tiny_smollm2: Path):
    """SmolLM2's tokenizer, and the session's small model of its architecture (see the module docstring)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_smollm2)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    return AutoModelForCausalLM.from_pretrained(tiny_smollm2), tokenizer


def one_step(config: type, out: Path, **extra: object) -> object:
    return config(
        output_dir=str(out), max_steps=1, per_device_train_batch_size=2, max_length=256, report_to=[],
        save_strategy="no", logging_steps=1, use_cpu=True, gradient_checkpointing=False, bf16=False, **extra,
    )  # fmt: skip


def load(rows: Path, name: str):
    from datasets import load_dataset

    cache = str(rows.parent / "hf-cache")  # its own cache: pytest reuses folder names across sessions
    return load_dataset("json", data_files=str(rows / f"{name}.jsonl"), split="train", cache_dir=cache)


def test_sft_trainer_takes_the_rows(rows, smollm2, tmp_path) -> None:
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = smollm2
    data = load(rows, "sft")
    trainer = SFTTrainer(
        model=model, args=one_step(SFTConfig, tmp_path), train_dataset=data, processing_class=tokenizer
    )
    text = tokenizer.decode(trainer.train_dataset[0]["input_ids"])
    assert '<tool_call>\n{"name": "act", "arguments": {"path": "1"}}' in text  # TRL rendered the call and the tools
    assert '"name": "act"' in text.split("<|im_end|>")[0]
    assert trainer.train().global_step == 1


def test_kto_trainer_takes_the_rows(rows, smollm2, tmp_path) -> None:
    from trl import KTOConfig, KTOTrainer

    model, tokenizer = smollm2
    data = load(rows, "kto")
    assert {True, False} == set(data["label"])
    args = one_step(KTOConfig, tmp_path)
    trainer = KTOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    assert trainer.train().global_step == 1


def test_dpo_trainer_takes_the_rows(rows, smollm2, tmp_path) -> None:
    from trl import DPOConfig, DPOTrainer

    model, tokenizer = smollm2
    data = load(rows, "dpo")
    assert data.num_rows >= 3 and any('"tool_calls"' in json.dumps(pair) for pair in data["chosen"])
    trainer = DPOTrainer(
        model=model, args=one_step(DPOConfig, tmp_path), train_dataset=data, processing_class=tokenizer
    )
    assert trainer.train().global_step == 1
