"""The loop with its agent on a served model (``josh.loop.served``), against a stand-in vLLM server and the scripted
loop: the baseline runs under the server's base name, every adapter is loaded once under its own name before a stage
uses it, and a server or recipe that cannot serve the loop's adapters stops it before any work."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from josh.llm.served_adapters import ServedAdapterError
from josh.loop.runner import Loop
from josh.run.components import ComponentOptions, Components
from tests.fakes.loop import StubTrainer, builder, merger
from tests.fakes.lora_server import LoraServer
from tests.loop.plumbing import recipe


class AdapterTrainer(StubTrainer):
    """The stub trainer, leaving an adapter folder a server can load."""

    def __call__(self, recipe: Any, resume: bool) -> pathlib.Path:
        run = super().__call__(recipe, resume)
        config = {"base_model_name_or_path": recipe.model.name, "r": recipe.lora.r}
        (run / "adapter_config.json").write_text(json.dumps(config))
        (run / "adapter_model.safetensors").write_bytes(b"weights")
        return run


def served(tmp_path: pathlib.Path, url: str | None, **changes: Any):
    setup = {"agent": "act", "backend": "openai", "model": "base", "base_url": url, "agent_options": {"examples": 0}}
    return recipe(tmp_path, setup=setup, kto=None, **changes)  # plumbing's recipe: the small held-out evaluation


def test_every_stage_runs_under_the_name_the_server_answers_to(tmp_path: pathlib.Path) -> None:
    models: list[str] = []

    def recording(options: ComponentOptions) -> Components:
        models.append(str(options.model))
        return builder(options)

    with LoraServer("base") as server:
        result = Loop(served(tmp_path, server.url), trainer=AdapterTrainer(), builder=recording, progress=False).run()
        loaded = dict(server.loaded)
        again = Loop(served(tmp_path, server.url), trainer=AdapterTrainer(), builder=recording, progress=False).run()
    assert [e.label for e in result.evaluated] == ["base", "warm start", "round 1 JOSH-SFT"]
    names = sorted(loaded)
    assert [name.split("@")[0] for name in names] == ["scripted/round-0/warmstart/train", "scripted/round-1/train-sft"]
    assert loaded[names[0]] == str((tmp_path / "scripted" / "round-0" / "warmstart" / "train").resolve())
    # base, then the warm start's evaluation and the round's search with its adapter, then JOSH-SFT's evaluation
    assert models == ["base", names[0], names[0], names[1]]
    assert again.ran == [] and len(server.loaded) == 2  # a resumed loop loads nothing again


@pytest.mark.parametrize(
    ("server", "changes", "fix"),
    [
        ({"runtime_loading": False}, {}, "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its environment"),
        ({"lora": False}, {}, "vllm serve base --enable-lora --max-lora-rank 16"),
        ({}, {"sft": {"model": {"name": "base"}, "lora": {"enabled": False}}}, "trains a full model"),
    ],
)
def test_a_server_or_recipe_that_cannot_serve_adapters_stops_the_loop_before_any_work(
    tmp_path: pathlib.Path, server: dict, changes: dict, fix: str
) -> None:
    with LoraServer("base", **server) as fake, pytest.raises(ServedAdapterError, match=fix):
        Loop(served(tmp_path, fake.url, **changes), trainer=AdapterTrainer(), builder=builder, progress=False).run()
    assert not (tmp_path / "scripted").exists()


def test_a_served_agent_needs_the_servers_address(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ServedAdapterError, match="set setup.base_url"):
        Loop(served(tmp_path, None), trainer=AdapterTrainer(), builder=builder, merger=merger, progress=False)
