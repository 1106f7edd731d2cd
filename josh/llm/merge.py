"""Fold a LoRA adapter into its base model and save the result as a full model folder.

The loop's KTO-on-SFT arm trains a fresh LoRA adapter on this folder, so KTO's reference model (the policy with
its adapter switched off) is the SFT policy rather than the raw base; the vllm backend serves an adapter merged
(``merge_adapter``) where vLLM's LoRA kernels are slow. The adapter folder's tokenizer, which carries the training
chat template, is saved alongside when it has one (else the base's), so inference and further training render prompts
as the training run did.
"""

from __future__ import annotations

from pathlib import Path

from josh.llm.models import ModelNotFoundError, adapter_base, is_adapter_dir, resolve_model
from josh.util.atomic import write_atomic


def has_tokenizer(folder: str | Path) -> bool:
    """Whether ``folder`` holds a tokenizer of its own (an adapter saved with one)."""
    return any((Path(folder) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))


def merge_adapter(adapter: str | Path, out: str | Path, *, dtype: str = "float32", base: str | None = None) -> Path:
    """``adapter`` merged into ``base`` (default: the base it names; ``peft`` ``merge_and_unload``) in ``dtype``
    ("auto": the base's own), written to ``out`` with its tokenizer and generation config."""
    import torch  # optional: the train extra
    from peft import PeftModel  # optional: the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: the train extra

    adapter, out = Path(adapter), Path(out)
    if not is_adapter_dir(adapter):
        raise ModelNotFoundError(f"{adapter} is not a PEFT adapter folder (no adapter_config.json)")
    path = base or resolve_model(adapter_base(adapter))
    weights = AutoModelForCausalLM.from_pretrained(path, dtype="auto" if dtype == "auto" else getattr(torch, dtype))
    merged = PeftModel.from_pretrained(weights, str(adapter)).merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out)
    AutoTokenizer.from_pretrained(adapter if has_tokenizer(adapter) else path).save_pretrained(out)
    template = adapter / "chat_template.jinja"
    if template.is_file() and not (out / "chat_template.jinja").is_file():
        write_atomic(out / "chat_template.jinja", template.read_text(encoding="utf-8"))
    return out
