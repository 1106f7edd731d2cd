"""GRPO's changes to vLLM and TRL for the colocated CPU engine (``josh.training.grpo.vllm``) hold only inside the
trainer's build and only on the versions they were written for. vLLM's and TRL's modules are stand-ins here (the
real engine runs in ``test_grpo_vllm.py``, in ``make test-vllm``): what is checked is what is replaced, when, and
that the originals come back."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from packaging.version import Version

from josh.training.grpo import vllm as colocated
from josh.training.recipe import load_recipe
from josh.util import patching

ROOT = Path(__file__).resolve().parents[2]


def packing(layer: Any, remove_weight: bool) -> None:
    layer.packed = remove_weight


def trl_llm(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return kwargs


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """vLLM's CPU platform and layer utilities and TRL's generation module, with the versions josh wrote for."""
    import trl.generation

    names = ["vllm", "vllm.platforms", "vllm.model_executor", "vllm.model_executor.layers"]
    modules = {name: ModuleType(name) for name in [*names, "vllm.model_executor.layers.utils"]}
    modules["vllm.platforms"].current_platform = SimpleNamespace(is_cpu=lambda: True)
    modules["vllm.model_executor.layers.utils"].dispatch_cpu_unquantized_gemm = packing
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    generation = ModuleType("trl.generation.vllm_generation")
    generation.LLM = trl_llm
    monkeypatch.setitem(sys.modules, generation.__name__, generation)
    monkeypatch.setattr(trl.generation, "vllm_generation", generation, raising=False)
    versions = {"vllm": "0.32.0", "trl": "1.16.0"}
    monkeypatch.setattr(patching, "installed_version", lambda *names: Version(versions[names[0]]))
    return {"utils": modules["vllm.model_executor.layers.utils"], "generation": generation, "versions": versions}


def grpo_recipe(generation: str) -> Any:
    return load_recipe(ROOT / "recipes/tiny-grpo.yaml", [f"grpo.generation={generation}"])


def test_the_engine_builds_with_josh_cpu_settings_inside_the_block_only(stand_ins) -> None:
    import torch

    utils, generation = stand_ins["utils"], stand_ins["generation"]
    with colocated.colocated_cpu_engine(grpo_recipe("vllm")):
        assert generation.LLM(model="m") == {"model": "m", "dtype": "float32", "enforce_eager": True}
        assert generation.LLM(model="m", dtype="bfloat16")["dtype"] == "bfloat16"  # TRL's own argument wins
        linear = SimpleNamespace(weight=torch.zeros(2, 3))
        utils.dispatch_cpu_unquantized_gemm(linear, True)
        assert linear.cpu_linear is torch.nn.functional.linear and not hasattr(linear, "packed")
        conv = SimpleNamespace(weight=torch.zeros(2, 3, 4))
        utils.dispatch_cpu_unquantized_gemm(conv, True)
        assert conv.packed is True  # not a 2-D weight: vLLM's own packing
    assert generation.LLM is trl_llm and utils.dispatch_cpu_unquantized_gemm is packing


def test_the_originals_come_back_when_the_build_fails(stand_ins) -> None:
    with pytest.raises(RuntimeError), colocated.colocated_cpu_engine(grpo_recipe("vllm")):
        raise RuntimeError("the engine failed to start")
    assert stand_ins["generation"].LLM is trl_llm and stand_ins["utils"].dispatch_cpu_unquantized_gemm is packing


def test_a_vllm_it_was_not_written_for_is_left_as_it_is_and_said_so(stand_ins, caplog) -> None:
    stand_ins["versions"]["vllm"] = "0.33.0"
    with caplog.at_level(logging.WARNING, logger="josh"), colocated.colocated_cpu_engine(grpo_recipe("vllm")):
        assert stand_ins["utils"].dispatch_cpu_unquantized_gemm is packing
        assert stand_ins["generation"].LLM is not trl_llm  # TRL 1.16 is in its range
    assert "written for vllm >=0.32,<0.33, found vllm 0.33.0" in caplog.text and "weight_loader" in caplog.text


def test_hf_generation_changes_nothing(stand_ins) -> None:
    with colocated.colocated_cpu_engine(grpo_recipe("hf")):
        assert stand_ins["generation"].LLM is trl_llm and stand_ins["utils"].dispatch_cpu_unquantized_gemm is packing
