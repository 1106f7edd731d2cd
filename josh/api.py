"""josh from Python: build an environment, an LLM, an agent and a user simulator by name, then search, extract,
train, evaluate and check, as the command line does. ``import josh`` reaches every name here lazily.

Each builder is the one way josh builds that piece (the CLI and the recipes use the same registries), with the same
checks: an unknown name or option is a ``ValueError`` naming the valid ones. Each step returns its result as values
and writes files only when given a folder (``out``), except ``train``, whose result is a model folder.

    import josh

    env = josh.make_env("toolwoz", data="mini")
    user = josh.make_user("agenda", env)
    tree = josh.search_task(env, env.tasks("train")[0], josh.make_agent("oracle", env), user, max_beam=2)
    harvest = josh.extract([tree], agent="function_calling", env=env)  # rows in the prompt of the agent to train
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from josh.agents import AGENTS, Agent, agent_prompt
from josh.core.env import Env
from josh.core.llm import LLM, run_with_llms
from josh.core.user import UserSimulator
from josh.envs.checker import CheckReport
from josh.envs.checker import check_env as _check_env
from josh.eval.evaluate import evaluate as _evaluate
from josh.eval.evaluate import load_results
from josh.eval.metrics import Summary
from josh.harvest.extract import TRL_FORMATS, ExtractConfig, Extracted, extract_rows, whitespace_tokens, write_all
from josh.harvest.extract_stats import ExtractStats
from josh.harvest.reframe import RECORDED, Reframe, reframed
from josh.llm.factory import make_llm as _make_llm
from josh.run.components import build_judged_env
from josh.run.conversation import ConversationRecord
from josh.search.algorithm import SearchConfig
from josh.search.algorithm import search as _search
from josh.search.tree import Tree
from josh.training.recipe import build_recipe
from josh.training.runner import train as _train
from josh.types import Task
from josh.users import USERS
from josh.users import make_user as _make_user
from josh.util.atomic import write_atomic


class Harvest(NamedTuple):
    """What ``extract`` returns: the rows of each format and the counts behind them."""

    rows: Extracted
    stats: ExtractStats


class Evaluation(NamedTuple):
    """What ``evaluate`` returns: the figures over every conversation, and each conversation's record."""

    summary: Summary
    records: list[ConversationRecord]


def make_env(name: str = "toolwoz", data: str = "default", **options: Any) -> Env:
    """The environment ``name`` on its ``data`` ('default': its own; ToolWOZ: 'mini', 'toolwoz' or a folder), or an
    OpenEnv server (``openenv:URL``); the judge its options name (τ²: ``judge``, ``judge_options``) built with its
    options and attached, as ``josh check-env`` does."""
    return build_judged_env(name, data, options)


def make_llm(backend: str, model: str | None = None, **settings: Any) -> LLM:
    """The LLM backend ``backend`` ('hf', 'vllm', 'openai', 'scripted') on ``model`` with its settings."""
    return _make_llm(backend, model, **settings)


def make_agent(name: str, env: Env, llm: LLM | None = None, **options: Any) -> Agent:
    """The agent ``name`` on ``env``; a prompted one (react, function_calling, act) writes with ``llm``."""
    AGENTS.check(name, env=str(getattr(env, "name", "")) or None, options=options)
    return AGENTS.build(name, env, llm, options=options)


def make_user(name: str, env: Env, llm: LLM | None = None, **options: Any) -> UserSimulator:
    """The user simulator ``name`` for ``env`` (with its user tools); an LLM one writes with ``llm``."""
    USERS.check(name, env=str(getattr(env, "name", "")) or None, options=options)
    return _make_user(name, llm, user_tools=env.user_tools or None, **options)


def _llms(*parts: object) -> list[LLM]:
    """The LLMs the agents and users use, once each, so their connections close with the session."""
    found: dict[int, LLM] = {}
    for part in parts:
        llm = getattr(part, "llm", None)
        if llm is not None:
            found[id(llm)] = llm
    return list(found.values())


def search_task(
    env: Env,
    task: Task,
    agent: Agent,
    user: UserSimulator,
    *,
    max_beam: int = 8,
    branching: int = 2,
    max_depth: int = 15,
) -> Tree:
    """The JOSH search of one task (``josh.search.algorithm``): its tree."""
    config = SearchConfig(max_beam=max_beam, branching=branching, max_depth=max_depth)
    return run_with_llms(_llms(agent, user), _search(task, env, agent, user, config))


def extract(
    trees: Iterable[Tree],
    *,
    agent: str | None = None,
    env: Env | None = None,
    agent_options: Mapping[str, Any] | None = None,
    min_reward: float = 1.0,
    trim_at_failure: bool = False,
    out: str | Path | None = None,
) -> Harvest:
    """The training rows of ``trees`` (SFT from each ideal path, KTO and DPO from the pruned siblings), as
    ``josh extract`` makes them; with ``out``, also written there as ``sft.jsonl``, ``kto.jsonl``, ``dpo.jsonl``.

    Each row starts with the system prompt, preamble and tools of the agent that will be trained: ``agent`` (a
    prompted agent, with ``agent_options``, over ``env``, the environment the trees were searched in), else the
    trees' own. A scripted agent's trees record none, so they need ``agent`` (or ``agent="recorded"`` to keep them
    without a prompt), as ``josh extract --agent`` does."""
    trees, stats = list(trees), ExtractStats()
    if agent is not None and agent != RECORDED:
        if env is None:
            raise ValueError("extract(agent=...) needs env=: the environment the trees were searched in")
        prompt = agent_prompt(agent, env, **dict(agent_options or {}))
        trees = reframed(trees, Reframe(prompt, env, env.splits), stats)
    elif agent is None and any(tree.nodes and not tree.system and tree.protocol is None for tree in trees):
        raise ValueError(
            "a scripted agent searched these trees and they record no system prompt: pass agent= (the prompted agent "
            "to train, e.g. 'function_calling') with env=, or agent='recorded' to keep the rows without one"
        )
    config = ExtractConfig(min_reward=min_reward, trim_at_failure=trim_at_failure)
    rows = extract_rows(trees, config, stats)
    if out is not None:
        write_all(Path(out), rows, stats, whitespace_tokens, TRL_FORMATS)
    return Harvest(rows, stats)


def evaluate(
    env: Env,
    tasks: Sequence[Task],
    agent: Agent,
    user: UserSimulator,
    *,
    trials: int = 1,
    max_turns: int = 15,
    concurrency: int = 8,
    out: str | Path | None = None,
) -> Evaluation:
    """The agent on ``tasks`` without search, ``trials`` conversations each; with ``out``, the run folder
    (``results.jsonl``, ``summary.json``; rerun to resume), else nothing is kept on disk."""
    with tempfile.TemporaryDirectory(prefix="josh-eval-") as scratch:
        folder = Path(out) if out is not None else Path(scratch)
        work = _evaluate(env, tasks, agent, user, folder, trials=trials, concurrency=concurrency, max_turns=max_turns)
        summary = run_with_llms(_llms(agent, user), work)
        return Evaluation(summary, load_results(folder))


def train(
    method: str, rows: Sequence[dict[str, Any]] | str | Path, *, output_dir: str | Path, overrides: Sequence[str] = ()
) -> Path:
    """Fine-tune with ``method`` ('sft', 'kto', 'dpo', 'tree') on ``rows`` (a rows file, or the rows themselves,
    written into the run folder first) and return the run folder; ``overrides`` are recipe keys as ``--set`` takes
    them (``"optim.max_steps=1"``, ``"model.name=smollm2"``; any other argument of the method's TRL config as
    ``"sft.trl.dataloader_num_workers=2"``)."""
    folder = Path(output_dir)
    data = Path(rows) if isinstance(rows, str | Path) else None
    if data is None:
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / f"{method}-rows.jsonl"
        write_atomic(data, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    recipe = build_recipe({"method": method}, list(overrides), source="josh.train")
    recipe.data, recipe.output_dir, recipe.run_name = data, folder.parent, folder.name
    return _train(recipe)


def check_env(env: Env, **options: Any) -> CheckReport:
    """``josh check-env`` on ``env``: contract, splits, determinism, forks against replays, hostile calls, rewards
    (``josh.envs.checker.check_env``'s options); the report, whether or not every check passed."""
    return _check_env(env, raise_on_failure=False, **options)
