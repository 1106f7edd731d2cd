"""The loop's agent on a served model: ``setup.backend: openai`` against ``vllm serve BASE --enable-lora`` with runtime
adapter loading allowed. The baseline runs under the server's name for the base model; every adapter the loop trains
is loaded into the server (``josh.llm.served_adapters``) and evaluated and searched under its own name:
``<run>/<stage folder>@<stamp>``, where the stamp changes with the adapter's weights, so a retrained adapter is
loaded afresh and a resumed loop reuses what the server already holds. ``check`` runs before any work."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from josh.llm.models import is_adapter_dir
from josh.llm.served_adapters import RUNTIME_LOADING, ServedAdapterError, ServedAdapters
from josh.loop.recipe import LoopRecipe

WEIGHTS = "adapter_model.safetensors"


def adapter_stamp(adapter: Path) -> str:
    """A short stamp of the adapter's weights file (size and modification time): new weights, new stamp."""
    weights = adapter / WEIGHTS
    stat = weights.stat() if weights.is_file() else None
    key = f"{stat.st_size}:{stat.st_mtime_ns}" if stat else str(adapter.resolve())
    return hashlib.sha1(key.encode()).hexdigest()[:8]


class ServedPolicy:
    """Turns the loop's models (the base model name, adapter folders) into names a vLLM server answers to."""

    def __init__(self, recipe: LoopRecipe) -> None:
        setup = recipe.setup
        options = setup.llm_options
        url = setup.base_url or options.get("base_url")
        if not url:
            raise ServedAdapterError(
                "a loop whose agent is on the openai backend evaluates the adapters it trains on a vLLM server: set "
                f"setup.base_url to a server started with {RUNTIME_LOADING} vllm serve {setup.model} --enable-lora"
            )
        key = os.environ.get(str(options.get("api_key_env") or "OPENAI_API_KEY")) or "EMPTY"
        self.recipe, self.model = recipe, str(setup.model)
        self.client = ServedAdapters(str(url), api_key=key, timeout_s=float(options.get("timeout_s") or 120.0))
        self._base: str | None = None

    def check(self) -> None:
        """Fail in one line, before any work, when the server cannot serve the loop's models."""
        if self.recipe.kto_from == "sft":
            raise ServedAdapterError(
                "kto_from: sft evaluates KTO adapters of a merged SFT model, which a running server cannot load; "
                "use kto_from: base with a served agent"
            )
        arms = {key: arm for key in self.recipe.arm_keys if (arm := self.recipe.arm_recipe(key)) is not None}
        if full := [key for key, arm in arms.items() if not arm.lora.enabled]:
            raise ServedAdapterError(
                f"{', '.join(full)}: lora.enabled is false, so it trains a full model, which a running server cannot "
                "load; train LoRA adapters with a served agent"
            )
        self._base = self.client.check(self.model, max((arm.lora.r for arm in arms.values()), default=None))

    def name(self, model: str | Path) -> str:
        """The name requests for ``model`` carry: the served base, or the adapter, loaded first if need be."""
        base = self._base or self.client.base_name(self.model)
        self._base = base
        if str(model) == self.model:
            return base
        folder = Path(model)
        if not is_adapter_dir(folder):
            raise ServedAdapterError(f"{folder} is not an adapter of {self.model}: a running server cannot load it")
        try:
            where = folder.resolve().relative_to(self.recipe.output_dir.resolve())
        except ValueError:
            where = Path(folder.name)
        return self.client.load(folder, f"{where.as_posix()}@{adapter_stamp(folder)}", base)
