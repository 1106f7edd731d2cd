"""GRPO rollouts without a model: whole conversations in the mini ToolWOZ set with a scripted ACT policy, the agent's
tokens marked, and every bad input (equal rewards, an environment error mid-rollout, a conversation over
max_length, a failing reset or user simulator) skipped and counted, never a crash and never truncated."""

from __future__ import annotations

import json
from typing import Any

import pytest

from josh.llm.scripted import ScriptedLLM
from josh.training.grpo.rollout import WatchedEnv
from josh.training.grpo.trainer import ConversationRollout, environment_reward, prepare_tasks
from josh.training.recipe import RecipeError, build_recipe
from josh.types import Message


class WordTokenizer:
    """A stand-in for a chat-template tokenizer: one token per word, a role token and an end token per message,
    assistant messages marked in the mask."""

    pad_token_id, eos_token_id = 0, 1

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def apply_chat_template(self, messages: list[dict], *, tools: Any = None, add_generation_prompt: bool = False,
                            return_assistant_tokens_mask: bool = False, **_: Any) -> dict:  # fmt: skip
        ids: list[int] = []
        mask: list[int] = []
        for m in messages:
            words = [f"<{m['role']}>", *m["content"].split()]
            tokens = [self.vocab.setdefault(w, len(self.vocab) + 10) for w in words] + [self.eos_token_id]
            ids += tokens
            mask += [int(m["role"] == "assistant")] * len(tokens)
        if add_generation_prompt:
            ids.append(self.vocab.setdefault("<assistant>", len(self.vocab) + 10))
        return {"input_ids": ids, **({"assistant_masks": mask} if return_assistant_tokens_mask else {})}


def act(name: str, arguments: dict) -> str:
    return "Action: " + json.dumps({"name": name, "arguments": arguments})


class GoalCaller:
    """The k-th conversation makes the task's first goal call when ``plan[k]`` is true, then says it is done."""

    def __init__(self, plan: list[bool], goal: Any) -> None:
        self.plan, self.goal, self.started = plan, goal, 0

    def __call__(self, messages: list[Message], tools: Any, index: int) -> str:
        if messages[-1].content and messages[-1].content.startswith("Observation:"):
            return act("respond", {"content": "Done, anything else?"})
        first = sum(1 for m in messages if m.role == "assistant") == 0
        calls = first and self.plan[self.started % len(self.plan)]
        self.started += first
        return act(self.goal.name, self.goal.parameters) if calls else act("respond", {"content": "How can I help?"})


def rollout_for(*extra: str, max_length: int = 2048) -> ConversationRollout:
    settings = ["method=grpo", f"max_length={max_length}", "grpo.num_generations=2", "grpo.max_turns=2"]
    settings += ["grpo.limit=2", "grpo.agent_options={examples: 0}", "optim.per_device_train_batch_size=2", *extra]
    return ConversationRollout(build_recipe({}, settings), WordTokenizer())


def run(rollout: ConversationRollout, keys: list[str], plan: list[bool]) -> tuple[dict, ScriptedLLM]:
    llm = ScriptedLLM(GoalCaller(plan, rollout.tasks[keys[0]].goals[0]))
    return rollout.roll(keys, rollout.agent_on(llm)), llm


def test_groups_of_whole_conversations_with_the_agents_tokens_marked() -> None:
    rollout = rollout_for()
    a, b = list(rollout.tasks)
    out, _ = run(rollout, [a, a, b, b], [True, False, False, False])
    rewards = out["josh_reward"]
    assert rewards[0] > 0 and rewards[1:] == [0.0, 0.0, 0.0]
    assert environment_reward([], [], rewards) == rewards
    tok = rollout.tokenizer
    words = {v: k for k, v in tok.vocab.items()}
    first = [words.get(t, "") for t, bit in zip(out["completion_ids"][0], out["env_mask"][0], strict=True) if bit]
    assert first[0] == "<assistant>" and "Action:" in first and "Observation:" not in first  # tool results: no loss
    prompt = [words.get(t, "") for t in out["prompt_ids"][0]]
    assert prompt[0] == "<system>" and "<user>" in prompt and "<assistant>" not in prompt
    assert out["completion_ids"][0][-1] == tok.eos_token_id and out["env_mask"][0][-1] == 1  # ends on the agent
    assert not all(out["env_mask"][0])  # the user's and the tool's tokens in between are masked
    assert not any(out["env_mask"][2]) and not any(out["env_mask"][3])  # b's group: equal rewards, skipped
    stats = rollout.stats
    assert (stats.conversations, stats.groups, stats.equal_groups, stats.trained) == (4, 2, 1, 2)
    assert stats.llm_calls >= 4 and "1 of 2 groups had equal rewards" in stats.line()


class Faulty:
    """The mini ToolWOZ environment, with one tool (or reset) that raises."""

    def __init__(self, env: Any, tool: str | None = None, reset: bool = False) -> None:
        self.env, self.tool, self.fail_reset = env, tool, reset

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, task: Any) -> Any:
        if self.fail_reset:
            raise OSError("database went away")
        return self.env.reset(task)

    def call(self, state: Any, call: Any) -> Any:
        if call.name == self.tool:
            raise RuntimeError("index corrupted")
        return self.env.call(state, call)


@pytest.mark.parametrize("where", ["tool", "reset"])
def test_an_environment_error_skips_that_rollout_only(where: str) -> None:
    rollout = rollout_for()
    a = next(iter(rollout.tasks))
    goal = rollout.tasks[a].goals[0].name
    faulty = Faulty(rollout.env._env, tool=goal) if where == "tool" else Faulty(rollout.env._env, reset=True)
    rollout.env = WatchedEnv(faulty)
    out, _ = run(rollout, [a, a], [True, False])
    skipped = rollout.stats.skipped["env_error"]
    if where == "tool":  # the conversation that called the broken tool is skipped, its sibling trains
        assert out["josh_reward"] == [None, 0.0] and skipped == 1
    else:
        assert out["josh_reward"] == [None, None] and skipped == 2
    assert out["env_mask"][0] == [0] and out["completion_ids"][0] == [WordTokenizer.eos_token_id]


def test_a_conversation_over_max_length_is_skipped_not_truncated() -> None:
    rollout = rollout_for(max_length=60)
    a = next(iter(rollout.tasks))
    out, llm = run(rollout, [a, a], [True, False])
    assert out["josh_reward"] == [None, None] and rollout.stats.skipped["too_long"] == 2
    assert llm.requests == []  # the prompt alone filled max_length: nothing was generated
    assert all(mask == [0] for mask in out["env_mask"])


def test_a_failing_user_simulator_skips_the_rollout() -> None:
    class Broken:
        async def reply(self, task: Any, history: list[Message]) -> Any:
            raise TimeoutError("user LLM timed out")

    rollout = rollout_for()
    rollout.user = Broken()
    a = next(iter(rollout.tasks))
    out, _ = run(rollout, [a, a], [True, True])
    assert out["josh_reward"] == [None, None] and rollout.stats.skipped["user_error"] == 2


def test_a_rule_based_user_ignores_the_recipes_user_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper recipe names an openai user LLM; with the agenda user nothing asks for its API key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rollout = rollout_for("grpo.user=agenda", "grpo.user_backend=openai", "grpo.user_model=gpt-4o")
    assert rollout.user_llm is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["optim.per_device_train_batch_size=3"], "multiple of it"),
        (["grpo.limit=1", "optim.per_device_train_batch_size=4"], "needs 2 tasks"),
        (["grpo.agent=oracle"], "scripted"),
        (["grpo.user=goal"], "needs an LLM"),
        (["grpo.task_ids=[nope]"], "nope not in the train split"),
        (["grpo.agent_options={colour: red}"], "unknown key 'grpo.agent_options.colour' for the act agent"),
    ],
)
def test_bad_grpo_recipes_are_refused_before_a_model_loads(settings: list[str], message: str) -> None:
    with pytest.raises(RecipeError, match=message):  # the options when the recipe is read, the rest before loading
        recipe = build_recipe(
            {}, ["method=grpo", "grpo.num_generations=2", "optim.per_device_train_batch_size=2", *settings]
        )
        prepare_tasks(recipe)  # every check comes before the tokenizer loads


def test_seeded_rollouts_give_every_call_its_own_seed_and_repeat_exactly() -> None:
    rollout = rollout_for()
    a, b = list(rollout.tasks)

    def seeds_of(seed: int | None) -> list[int | None]:
        llm = ScriptedLLM(GoalCaller([True, False], rollout.tasks[a].goals[0]))
        rollout.roll([a, a, b, b], rollout.agent_on(llm), seed)
        return [r.sampling.seed for r in llm.requests]

    first = seeds_of(7)
    assert len(first) > 4 and None not in first and len(set(first)) == len(first)  # group members differ too
    assert seeds_of(7) == first
    assert set(seeds_of(8)).isdisjoint(first)
    assert seeds_of(None) == [None] * len(seeds_of(None))


def test_a_batch_seed_follows_the_step_and_repeats_after_a_resume() -> None:
    class Trainer:
        def __init__(self) -> None:
            self.state = type("State", (), {"global_step": 0})()
            self.accelerator = type("Accelerator", (), {"process_index": 0})()

    trainer, rollout = Trainer(), rollout_for()
    seeds = []
    for step in (0, 0, 1):
        trainer.state.global_step = step
        seeds.append(rollout.batch_seed(trainer))
    assert len(set(seeds)) == 3  # two batches of one step (num_iterations, accumulation) differ as well
    resumed = rollout_for()
    assert resumed.batch_seed(trainer) == seeds[2]
    trainer.accelerator.process_index = 1
    assert rollout_for().batch_seed(trainer) != seeds[2]
