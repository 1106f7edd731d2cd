"""Folding a LoRA adapter into SmolLM2: the merged full model computes what base + adapter computed."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.slow
def test_merged_model_matches_base_plus_adapter(tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from josh.llm.merge import merge_adapter
    from josh.llm.models import resolve_model

    base = resolve_model("smollm2")
    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    adapter = tmp_path / "adapter"
    model.save_pretrained(adapter)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.chat_template = "{{ 'TRAINING TEMPLATE' }}"
    tokenizer.save_pretrained(adapter)

    ids = tokenizer("Book a table for two in the centre.", return_tensors="pt").input_ids
    with torch.no_grad():
        want = model(ids).logits
        with model.disable_adapter():
            raw = model(ids).logits
    merged = merge_adapter(adapter, tmp_path / "merged")
    with torch.no_grad():
        got = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)(ids).logits
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(raw, want, atol=1e-3)
    assert not (merged / "adapter_config.json").exists()
    assert AutoTokenizer.from_pretrained(merged).chat_template == "{{ 'TRAINING TEMPLATE' }}"
