"""Rollouts spread over Ray actors: ``josh rollout --ray ADDRESS --actors N``.

Each actor builds its own environment, LLM backend(s), agent and user from the run's ``ComponentOptions`` (models
and engines are never pickled): with ``gpus_per_actor=1`` every actor gets one GPU and its own vLLM engine; with the
openai backend every actor is a client of the same endpoint; hf and scripted runs work on CPU.

The driver hands out tasks and keeps at most ``concurrency`` of them in flight per actor, so a faster actor simply
gets more work. Only the driver writes ``trees.jsonl``: each tree is appended and flushed as it arrives, so a run
that is stopped and started again skips the tasks already written, exactly like a single-process run. When an actor
dies (a crashed process, a lost node, an out-of-memory kill), a fresh actor takes its place and the tasks it had in
flight go back to the front of the queue, to whichever actor is free next; a task that was in flight on
``max_attempts`` dead actors is recorded as an error tree instead of being tried forever.
"""

from __future__ import annotations

import os
import socket
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.core.llm import LLMError, Usage
from josh.envs import build_env
from josh.llm.health import stop_if_failing
from josh.run.components import ComponentOptions, Components, build_components, preflight
from josh.search.algorithm import SearchConfig
from josh.search.rollout import RolloutOptions, RolloutSession, RunStats, search_task
from josh.search.tree import Tree
from josh.types import Task

INSTALL_HINT = "rollouts on Ray need Ray: pip install 'josh-agents[ray]'"

ComponentFactory = Callable[[ComponentOptions], Components]


class RayOptions(BaseModel):
    """Where the actors run and what each one may use."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field(
        "local", description="'local' starts a cluster here; 'auto', 'HOST:6379' or 'ray://HOST:10001' joins one"
    )
    actors: int = Field(2, ge=1, description="rollout actors; each builds its own backend")
    gpus_per_actor: float = Field(0.0, ge=0, description="GPUs reserved per actor (1 for one vLLM engine per GPU)")
    cpus_per_actor: float = Field(1.0, ge=0, description="CPUs reserved per actor")
    max_attempts: int = Field(3, ge=1, description="tries per task when actors die under it; then an error tree")


def import_ray() -> Any:
    """The ``ray`` module, or a ``ValueError`` that says how to install it."""
    try:
        import ray  # optional: the ray extra
    except ImportError as error:
        raise ValueError(INSTALL_HINT) from error
    return ray


class RolloutWorker:
    """One Ray actor's rollout machinery: its own env, backend(s), agent and user; searches one task per call."""

    def __init__(self, options: ComponentOptions, search: SearchConfig, factory: ComponentFactory | None) -> None:
        built = (factory or build_components)(options)
        self.env, self.agent, self.user = built.env, built.agent, built.user
        self.search_config = search

    async def ready(self) -> str:
        """Where the actor runs (answers once construction, e.g. model loading, has finished)."""
        return f"{socket.gethostname()}:{os.getpid()}"

    async def search(self, task: Task) -> str:
        """The task's tree as a ``trees.jsonl`` line."""
        tree = await search_task(task, self.env, self.agent, self.user, self.search_config)
        return tree.model_dump_json()


class ActorBackends:
    """The actors' backends as the failure policy (``josh.llm.health``) sees them from the driver: one outcome per
    tree, failed when its search hit an LLM failure after the backend's retries."""

    def __init__(self, name: str) -> None:
        self.name, self.usage = name, Usage()

    def saw(self, tree: Tree) -> None:
        if tree.failed:
            self.usage.failed(LLMError(tree.failed.removeprefix("llm_error: ")))
        else:
            self.usage.add([])


def error_tree(task: Task, search: SearchConfig, reason: str) -> Tree:
    """The record of a task that could not be searched at all."""
    tree = Tree(task_id=task.id, goals=list(task.goals), n_goals=len(task.goals), config=search.model_dump())
    tree.error = reason
    return tree


class ActorPool:
    """Rollout actors, task dispatch with per-actor limits, and replacement of actors that die."""

    def __init__(
        self,
        ray: Any,
        options: RayOptions,
        components: ComponentOptions,
        search: SearchConfig,
        factory: ComponentFactory | None,
        notify: Callable[[str], Any] = print,
    ) -> None:
        self.ray = ray
        self.notify = notify
        self.options = options
        self.search_config = search
        self._remote = ray.remote(RolloutWorker).options(
            num_cpus=options.cpus_per_actor, num_gpus=options.gpus_per_actor
        )
        self._args = (components, search, factory)
        self.actors = [self._new_actor() for _ in range(options.actors)]
        self.replaced = 0

    def _new_actor(self) -> Any:
        return self._remote.remote(*self._args)

    def wait_ready(self) -> list[str]:
        """Block until every actor is built; an actor that cannot build its components raises ``ValueError``."""
        try:
            return self.ray.get([actor.ready.remote() for actor in self.actors])
        except self.ray.exceptions.RayError as error:
            raise ValueError(f"the rollout actors could not start: {_reason(error)}") from error

    def run(self, tasks: Iterable[Task], per_actor: int) -> Iterator[Tree | str]:
        """Search every task; yields each tree as a JSON line (or an error ``Tree``) as soon as it is ready.

        A task whose actor died is a suspect: it is retried alone on an idle actor, so a task that keeps killing
        actors is told apart from the tasks that merely shared an actor with it."""
        fresh, suspects = deque(tasks), deque[Task]()
        attempts: Counter[str] = Counter()
        in_flight: dict[Any, tuple[Task, int, Any, bool]] = {}
        load = [0] * len(self.actors)
        alone = [False] * len(self.actors)

        def submit(task: Task, slot: int, suspect: bool) -> None:
            in_flight[self.actors[slot].search.remote(task)] = (task, slot, self.actors[slot], suspect)
            load[slot] += 1
            alone[slot] = suspect

        while fresh or suspects or in_flight:
            open_slots = [slot for slot in range(len(self.actors)) if not alone[slot]]
            for slot in open_slots:
                if suspects and load[slot] == 0:
                    submit(suspects.popleft(), slot, True)
            # while suspects wait, the least busy actor takes no new tasks so that it becomes idle for them
            draining = min(open_slots, key=load.__getitem__) if suspects and open_slots else None
            for slot in open_slots:
                while fresh and not alone[slot] and slot != draining and load[slot] < per_actor:
                    submit(fresh.popleft(), slot, False)
            ready, _ = self.ray.wait(list(in_flight), num_returns=1)
            task, slot, actor, suspect = in_flight.pop(ready[0])
            load[slot] -= 1
            alone[slot] = alone[slot] and not suspect
            try:
                line = self.ray.get(ready[0])
            except self.ray.exceptions.RayError as error:
                if isinstance(error, self.ray.exceptions.RayActorError) and self.actors[slot] is actor:
                    self.actors[slot] = self._new_actor()
                    self.replaced += 1
                    self.notify(f"actor {slot} died ({_reason(error)}); started a replacement")
                attempts[task.id] += 1
                if attempts[task.id] < self.options.max_attempts:
                    suspects.append(task)
                    continue
                reason = f"gave up after {attempts[task.id]} attempts on Ray: {_reason(error)}"
                yield error_tree(task, self.search_config, reason)
                continue
            yield line

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)


def _reason(error: BaseException) -> str:
    """The error's type and its last non-empty line, cut after its first sentence."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"{type(error).__name__}: {last.split('. ')[0]}"


def _connect(ray: Any, address: str) -> bool:
    """Connect to (or start) the cluster unless already connected; True when this call did it."""
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return True


def _check_resources(ray: Any, options: RayOptions) -> None:
    """Fail early when the cluster cannot hold the actors at all (they would wait forever)."""
    have = ray.cluster_resources()
    for name, each in (("GPU", options.gpus_per_actor), ("CPU", options.cpus_per_actor)):
        need = each * options.actors
        if need > have.get(name, 0.0) + 1e-9:
            raise ValueError(
                f"{options.actors} actors x {each:g} {name} need {need:g} {name}s; the cluster has "
                f"{have.get(name, 0):g} (fewer --actors or a smaller --{name.lower()}s-per-actor)"
            )


def rollout_on_ray(
    options: RolloutOptions,
    ray_options: RayOptions,
    *,
    tasks: Iterable[Task] | None = None,
    factory: ComponentFactory | None = None,
    progress: bool = True,
    on_tree: Callable[[Tree], Any] | None = None,
) -> RunStats:
    """Search every task not yet in ``options.out/trees.jsonl`` on Ray actors and append its tree.

    ``tasks`` defaults to the split the component options name. ``factory`` builds each actor's components from
    the options (default ``build_components``); it is pickled to the actors, so it must be importable there or
    defined in ``__main__``. ``options.rollout.concurrency`` is the number of tasks in flight per actor."""
    ray = import_ray()
    comps = options.components
    if tasks is None:
        tasks = build_env(comps.env, comps.data).tasks(comps.split)[: comps.limit]
    session = RolloutSession(tasks, options.out, progress=progress, on_tree=on_tree, run=comps.run_info())
    if not session.todo:
        session.compact()
        return session.finish()
    preflight(comps)
    started = _connect(ray, ray_options.address)
    pool = None
    try:
        _check_resources(ray, ray_options)
        pool = ActorPool(ray, ray_options, comps, options.rollout.search, factory, session.console.print)
        hosts = pool.wait_ready()
        if progress:
            session.console.print(f"{len(hosts)} Ray actors on {len({h.split(':')[0] for h in hosts})} node(s)")
        backends = ActorBackends(f"{comps.backend}:{comps.model} on the Ray actors")
        with session.recording():
            for result in pool.run(session.todo, options.rollout.concurrency):
                tree = result if isinstance(result, Tree) else Tree.model_validate_json(result)
                backends.saw(tree)
                stop_if_failing([backends])
                session.record(tree, None if isinstance(result, Tree) else result)
        stop_if_failing([backends], ended=True)
        session.compact()
    finally:
        if pool is not None:
            pool.close()
        if started:
            ray.shutdown()
        stats = session.finish()
    return stats
