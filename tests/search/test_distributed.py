"""Rollouts on a local Ray cluster: sharding, a crashing actor's tasks retried elsewhere, resume, bad options."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.run.components import ComponentOptions, Components, build_env
from josh.search.algorithm import SearchConfig
from josh.search.rollout import STATS_FILE, TREES_FILE, RolloutConfig, RolloutOptions
from tests.cli.test_ray_serving import vllm_server as vllm_server
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task

if importlib.util.find_spec("ray") is None:  # found without importing it: collecting this module stays cheap
    pytest.skip("Ray is not installed (the josh-agents[ray] extra)", allow_module_level=True)
pytestmark = pytest.mark.slow  # a local Ray cluster: ~50 s on 2 cores

from josh.search.distributed import RayOptions, rollout_on_ray  # noqa: E402

SEARCH = SearchConfig(max_depth=4)


@pytest.fixture(scope="module")
def cluster():
    """One small local cluster for every test in this module (startup costs seconds on 2 cores)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


class CrashingAgent(TableAgent):
    """Kills its own process on ``crash_on`` tasks: once per marker file, or every time without one."""

    def __init__(self, crash_on: set[str], marker: str | None) -> None:
        super().__init__(goals={(1,): (0,), (1, 0, 1): (1,)})
        self.crash_on, self.marker = crash_on, marker

    async def turn(self, history, state, *, n=1):
        if state.task.id in self.crash_on:
            first = self.marker is not None and not os.path.exists(self.marker)
            if self.marker is None or first:
                if first:
                    Path(self.marker).write_text(f"{state.task.id} pid {os.getpid()}")
                os._exit(1)
        return await super().turn(history, state, n=n)


def fake_components(options: ComponentOptions, crash_on: tuple[str, ...] = (), marker: str | None = None) -> Components:
    """Built inside each actor: the search fakes, plus the pid in every tree's system prompt."""
    agent = CrashingAgent(set(crash_on), marker)
    agent.system = f"pid {os.getpid()}"
    return Components(env=FakeEnv(), tasks=[], agent=agent, user=TableUser(), llms=[])


def tasks(n: int):
    return [make_task(2, f"task{i:02d}") for i in range(n)]


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / TREES_FILE).read_text().splitlines()]


def run(out: Path, task_list, factory=fake_components, **ray_options):
    options = RolloutOptions(out=out, rollout=RolloutConfig(search=SEARCH, concurrency=2))
    ray_options = RayOptions(actors=2, cpus_per_actor=0.5, **ray_options)
    return rollout_on_ray(options, ray_options, tasks=task_list, factory=factory, progress=False)


def test_tasks_are_shared_out_and_written_once(cluster, tmp_path) -> None:
    stats = run(tmp_path, tasks(12))
    recs = records(tmp_path)
    assert [r["task_id"] for r in recs] == [f"task{i:02d}" for i in range(12)]  # finished: compacted in task order
    assert all(r["success"] and r["error"] is None for r in recs)
    assert len({r["system"] for r in recs}) == 2, "both actors searched tasks"
    assert stats.tasks == 12 and json.loads((tmp_path / STATS_FILE).read_text())["success"] == 12


def test_a_crashed_actors_tasks_are_retried_on_another_actor(cluster, tmp_path, capsys) -> None:
    marker = tmp_path / "crashed"
    factory = functools.partial(fake_components, crash_on=("task03",), marker=str(marker))
    stats = run(tmp_path / "run", tasks(10), factory=factory)
    recs = records(tmp_path / "run")
    ids = [r["task_id"] for r in recs]
    crashed, dead_pid = marker.read_text().split(" pid ")
    assert crashed == "task03", "the actor really died on task03"
    assert sorted(ids) == [f"task{i:02d}" for i in range(10)] and len(ids) == len(set(ids))
    assert stats.success == 10 and stats.failed_tasks == 0
    assert next(r["system"] for r in recs if r["task_id"] == "task03") != f"pid {dead_pid}"
    said = " ".join(capsys.readouterr().out.split())
    assert "died (ActorDiedError" in said and "started a replacement" in said


def test_a_task_that_always_kills_its_actor_becomes_an_error_tree(cluster, tmp_path) -> None:
    factory = functools.partial(fake_components, crash_on=("task01",))
    stats = run(tmp_path, tasks(4), factory=factory, max_attempts=2)
    by_id = {r["task_id"]: r for r in records(tmp_path)}
    assert sorted(by_id) == ["task00", "task01", "task02", "task03"]
    assert "gave up after 2 attempts" in by_id["task01"]["error"] and "ActorDiedError" in by_id["task01"]["error"]
    assert stats.failed_tasks == 1 and stats.success == 3


def test_restart_skips_finished_tasks(cluster, tmp_path) -> None:
    run(tmp_path, tasks(5))
    first = [r["task_id"] for r in records(tmp_path)]
    stats = run(tmp_path, tasks(8))
    ids = [r["task_id"] for r in records(tmp_path)]
    assert ids[:5] == first and sorted(ids) == [f"task{i:02d}" for i in range(8)]
    assert stats.skipped_finished == 5 and stats.tasks == 8


def test_actors_that_cannot_build_their_components_fail_clearly(cluster, tmp_path) -> None:
    options = RolloutOptions(out=tmp_path, components=ComponentOptions(env="nonsense"))
    with pytest.raises(ValueError, match="unknown environment 'nonsense'"):
        rollout_on_ray(options, RayOptions(actors=1, cpus_per_actor=0.5), tasks=tasks(2), progress=False)
    assert not (tmp_path / TREES_FILE).exists() or not (tmp_path / TREES_FILE).read_text()


def test_more_gpus_than_the_cluster_has_is_refused(cluster, tmp_path) -> None:
    options = RolloutOptions(out=tmp_path)
    with pytest.raises(ValueError, match="need 2 GPUs; the cluster has 0"):
        rollout_on_ray(options, RayOptions(actors=2, gpus_per_actor=1), tasks=tasks(2), progress=False)


def test_cli_rollout_on_ray_with_actors_as_clients_of_a_served_adapter(cluster, vllm_server, tmp_path) -> None:
    args = ["rollout", "--out", str(tmp_path), "--ray", "local", "--actors", "2", "--cpus-per-actor", "0.5"]
    args += ["--backend", "openai", "--model", "josh", "--base-url", vllm_server.url, "--split", "test"]
    args += ["--limit", "3", "--beam", "2", "--branching", "2", "--max-depth", "2", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(r["task_id"] for r in records(tmp_path)) == [
        t.id for t in build_env("toolwoz", "mini").tasks("test")[:3]
    ]
    assert vllm_server.bodies and {b["model"] for b in vllm_server.bodies} == {"josh"}
    assert "3 tasks (0 already done)" in result.output


def scripted_react(options: ComponentOptions) -> Components:
    """Built inside each actor: the real mini ToolWOZ env, a ReACT agent on the scripted backend, the agenda user."""
    from josh.agents import make_agent
    from josh.llm.factory import make_llm
    from josh.users import make_user

    env = build_env("toolwoz", "mini")
    llm = make_llm("scripted", replies=["PLAN greet the customer <COMMAND_END>\nSPEAK How can I help? <COMMAND_END>"])
    return Components(env=env, tasks=[], agent=make_agent("react", env, llm), user=make_user("agenda"), llms=[llm])


def test_real_components_on_the_scripted_backend_run_on_ray(cluster, tmp_path) -> None:
    task_list = build_env("toolwoz", "mini").tasks("train")[:4]
    search = SearchConfig(max_beam=2, branching=2, max_depth=2)
    options = RolloutOptions(out=tmp_path, rollout=RolloutConfig(search=search, concurrency=2))
    ray_options = RayOptions(actors=2, cpus_per_actor=0.5)
    rollout_on_ray(options, ray_options, tasks=task_list, factory=scripted_react, progress=False)
    trees = records(tmp_path)
    assert sorted(t["task_id"] for t in trees) == [t.id for t in task_list]
    # root and 2 sampled siblings at least (the agenda user may end a conversation after the first turn)
    assert all(t["error"] is None and t["stats"]["llm_calls"] >= 2 and len(t["nodes"]) >= 3 for t in trees)


def test_hf_backend_with_smollm2_runs_on_ray(cluster, tmp_path) -> None:
    """One actor loads SmolLM2 and searches both tasks, prompted without worked examples or the tool listing (214
    tokens, not 828): the hf backend inside a Ray actor is what is tested (each actor is a process that imports torch
    and loads the model; sharding over actors is the fake tests' to check)."""
    from josh.core.llm import Sampling

    components = ComponentOptions(
        split="train", agent="react", backend="hf", model="smollm2", user="agenda", limit=2,
        agent_options={"examples": 0, "tool_listing": "none"}, agent_sampling=Sampling(temperature=0.8, max_new_tokens=12),
    )  # fmt: skip
    search = SearchConfig(max_beam=2, branching=2, max_depth=1)
    options = RolloutOptions(out=tmp_path, components=components, rollout=RolloutConfig(search=search, concurrency=2))
    stats = rollout_on_ray(options, RayOptions(actors=1, cpus_per_actor=0.5), progress=False)
    trees = records(tmp_path)
    assert stats.tasks == 2 and len(trees) == 2
    assert all(t["error"] is None and t["stats"]["completion_tokens"] > 0 and len(t["nodes"]) == 3 for t in trees)
