"""The real loop on a tiny slice: SmolLM2 acts through the hf backend, TRL trains LoRA adapters, the evaluations
load them. Sizes are cut to the bone so it stays within CI's budget; the demo measures quality, this test plumbing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from josh.envs.toolwoz.schema import openai_tools
from josh.loop.recipe import load_loop_recipe
from josh.loop.runner import Loop
from josh.loop.stages.manifest import input_digest, read_manifest

ROOT = Path(__file__).resolve().parents[2]


# One search of depth 1 on 2 tasks, one training step of one row per arm (a step's cost is its tokens: one row is
# half the demo's batch of two), evaluations of one turn, 12 new tokens a generation (an action's opening; whole
# actions need about 40, and a CPU decoding step of SmolLM2 costs ~50 ms a token): plumbing, not quality.
TINY_SEARCH = [
    "rollout.tasks=2",
    "rollout.search.max_depth=1",
    "rollout.search.max_beam=2",
    "rollout.sampling.max_new_tokens=12",
    "extract.min_reward=0.0",
    "extract.drop_errors=[]",
    "controls.random=true",
    "eval.max_turns=1",
    "eval.sampling.max_new_tokens=12",
    "setup.agent_options.max_generations=2",
    "sft.optim.max_steps=1",
    "sft.optim.per_device_train_batch_size=1",
]


@pytest.mark.slow
def test_real_loop_on_a_tiny_slice(tmp_path: Path) -> None:
    """The whole loop on the real SmolLM2 (warm start, search, both arms, two seeds each, evaluations, report): it
    stays the suite's costliest loop test because every stage loads and runs the 135M model at least once."""
    recipe = load_loop_recipe(
        ROOT / "recipes" / "demo-cpu.yaml",
        [
            f"output_dir={tmp_path}",
            "baseline=false",
            "warm_start.tasks=4",
            "warm_start.max_turns=1",
            "rollout.skip=4",
            "eval.limit=2",
            "sft.max_length=768",
            "train_seeds=2",
            *TINY_SEARCH,
        ],
    )
    result = Loop(recipe, progress=False).run()
    run_dir = tmp_path / "demo-cpu"
    labels = [e.label for e in result.evaluated]
    # A one-step warm start rarely earns a reward in 2 searched tasks: JOSH-SFT trains only when it did, and says
    # why not otherwise; the no-selection control always has random branches to train on.
    josh = "round 1 JOSH-SFT" in labels
    assert labels == ["warm start", *(["round 1 JOSH-SFT"] if josh else []), "round 1 control-random"]
    assert josh or any(n.arm == "JOSH-SFT" for n in result.notes)
    control = run_dir / "round-1" / "control-random"
    warm = run_dir / "round-0" / "warmstart"
    for folder in (warm / "train", warm / "train-seed1", control / "train", control / "train-seed1"):
        assert (folder / "adapter_model.safetensors").is_file()
        assert json.loads((folder / "metrics.json").read_text())["global_step"] == 1
    assert read_manifest(warm / "eval-seed1").inputs["model"] == input_digest(warm / "train-seed1")
    assert read_manifest(control / "eval").inputs["model"] == input_digest(control / "train")
    records = (control / "eval" / "results.jsonl").read_text().splitlines()
    assert len(records) == 2 and all(json.loads(r)["llm_calls"] >= 1 for r in records)
    trees = (run_dir / "round-1" / "rollouts" / "trees.jsonl").read_text().splitlines()
    assert len(trees) == 2
    report = json.loads((run_dir / "report.json").read_text())
    assert report["harvest"][0]["trees"] == 2 and report["harvest"][0]["control_rows"] == 2
    assert report["harvest"][0]["token_counter"] == "smollm2"
    models = {m["label"]: m for m in report["models"]}
    assert len(models["warm start"]["seed_rewards"]) == 2 and len(models["round 1 control-random"]["seed_rewards"]) == 2
    assert "| round 1 control-random |" in (run_dir / "report.md").read_text()
    assert (run_dir / "plots" / "reward.png").is_file()


ACTION_NAME = re.compile(r'^Action: \{"name": "([a-z_]+)"')


@pytest.mark.slow
def test_loop_through_examples_as_turns_and_constrained_decoding(tmp_path: Path) -> None:
    """No warm start: the raw model runs search with worked examples as chat turns and the tool-schema grammar; every
    action it writes names a real tool, and the trees and the trained rows carry the examples the model saw."""
    recipe = load_loop_recipe(
        ROOT / "recipes" / "demo-cpu.yaml",
        [
            f"output_dir={tmp_path}",
            "baseline=false",
            "warm_start.enabled=false",
            "setup.agent_options.examples=1",
            "setup.agent_options.examples_as_turns=true",
            "setup.agent_options.constrain=true",
            "eval.limit=1",
            "sft.max_length=1536",
            *TINY_SEARCH,
            "rollout.sampling.max_new_tokens=16",  # room for the longest tool name: its action opening is 12 tokens
        ],
    )
    Loop(recipe, progress=False).run()
    run_dir = tmp_path / "demo-cpu"
    tools = {t["function"]["name"] for t in openai_tools()} | {"respond"}
    trees = [json.loads(line) for line in (run_dir / "round-1" / "rollouts" / "trees.jsonl").read_text().splitlines()]
    assert len(trees) == 2
    actions = [
        m["content"] for tree in trees for node in tree["nodes"] for m in node["messages"] if m["role"] == "assistant"
    ]
    assert actions and all(ACTION_NAME.match(a) and ACTION_NAME.match(a)[1] in tools for a in actions), actions
    preamble = trees[0]["preamble"]
    assert preamble and preamble[0]["role"] == "user" and preamble[1]["content"].startswith("Action: ")
    rows = (run_dir / "round-1" / "control-random" / "data" / "sft.jsonl").read_text().splitlines()
    first = json.loads(rows[0])["messages"]

    def text(messages: list[dict]) -> list[tuple[str, str]]:
        return [(m["role"], m["content"]) for m in messages]

    assert first[0]["role"] == "system" and text(first[1 : 1 + len(preamble)]) == text(preamble)
    assert (run_dir / "round-1" / "control-random" / "train" / "adapter_model.safetensors").is_file()
