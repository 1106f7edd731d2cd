"""The merge stage: a LoRA adapter folded into its base model, a full model folder with the adapter's tokenizer
(the SFT policy that KTO trains on with ``kto_from: sft``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.llm.merge import merge_adapter
from josh.loop.stages.base import Stage, StageContext
from josh.loop.stages.manifest import Input


def merge_with_peft(adapter: Path, out: Path, dtype: str) -> Path:
    """The real merger (PEFT ``merge_and_unload``); tests inject a cheaper one."""
    return merge_adapter(adapter, out, dtype=dtype)


class MergeStage(Stage):
    """Fold ``adapter`` into its base in ``dtype``."""

    def __init__(self, ctx: StageContext, name: str, adapter: Path, folder: Path, dtype: str) -> None:
        super().__init__(ctx, name, folder)
        self.adapter, self.dtype = adapter, dtype

    def settings(self) -> dict[str, Any]:
        return {"dtype": self.dtype}

    def inputs(self) -> dict[str, Input]:
        return {"adapter": self.adapter}

    def outputs(self) -> list[Path]:
        return [self.folder / "config.json"]

    def run(self) -> None:
        self.ctx.merger(self.adapter, self.folder, self.dtype)
