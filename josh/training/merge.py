"""Fold a LoRA adapter into its base model and save the result as a full model folder.

The loop's KTO-on-SFT arm trains a fresh LoRA adapter on this folder, so KTO's reference model (the policy with
its adapter switched off) is the SFT policy rather than the raw base. The adapter folder's tokenizer, which carries
the training chat template, is saved alongside, so inference and further training render prompts as the SFT run did.
"""

from __future__ import annotations

from pathlib import Path

from josh.llm.models import ModelNotFoundError, adapter_base, is_adapter_dir, resolve_model
from josh.training.model import torch_dtype
from josh.util.atomic import write_atomic


def merge_adapter(adapter: str | Path, out: str | Path, *, dtype: str = "float32") -> Path:
    """``adapter`` merged into its base (``peft`` ``merge_and_unload``), written to ``out`` with its tokenizer."""
    from peft import PeftModel  # optional: the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: the train extra

    adapter, out = Path(adapter), Path(out)
    if not is_adapter_dir(adapter):
        raise ModelNotFoundError(f"{adapter} is not a PEFT adapter folder (no adapter_config.json)")
    base = AutoModelForCausalLM.from_pretrained(resolve_model(adapter_base(adapter)), dtype=torch_dtype(dtype))
    merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(out)
    template = adapter / "chat_template.jinja"
    if template.is_file() and not (out / "chat_template.jinja").is_file():
        write_atomic(out / "chat_template.jinja", template.read_text(encoding="utf-8"))
    return out
