import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.required import missing

# Hypothesis's per-example deadline (200 ms) measures the machine, not the code: a loaded CI machine failed a
# round-trip property at 412 ms. Every example still runs and every assertion holds; only the timing check is off.
settings.register_profile("josh", deadline=None)
settings.load_profile("josh")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "offline")

# Under pytest-xdist each worker (and the processes it starts) gets an equal share of the cores for torch's and
# OpenMP's thread pools: two workers each spinning up a pool over every core oversubscribe a small machine badly.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

# Ray starts its worker processes at nice 15, so beside any other load the actors doing a Ray test's work starve:
# with two busy loops on the 2-core machine, tests/search/test_distributed.py's restart test took 65.7 s against 5.5 s
# at nice 0, and the SmolLM2 actor test 435 s in a loaded `make test` against 24 s. The tests' clusters run them at 0.
os.environ.setdefault("RAY_worker_niceness", "0")

# ``$JOSH_SHARED_DATA`` points a worktree that is not beside ``shared/`` at the data.
SHARED_DATA = Path(os.environ.get("JOSH_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data beside the checkout (``../shared/data``); tests that need it skip when it is absent, and fail
    under ``CI=true`` (``tests.required``)."""
    if not SHARED_DATA.is_dir():
        missing(f"the real data is not at {SHARED_DATA} (../shared/data, or $JOSH_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="module")
def mini_env():
    """The ToolWOZ environment over the shipped mini set (built once per test module)."""
    from josh.run.components import build_env

    return build_env("toolwoz", "mini")


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environments, agents, protocols and users registered in a test are forgotten after it."""
    import josh.agents
    import josh.envs
    import josh.users

    for registry in (josh.agents.AGENTS, josh.users.USERS, josh.envs.ENVIRONMENTS):
        registry.names()  # its own modules register first, so they stay registered
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_aliases", dict(registry._aliases))
    monkeypatch.setattr(josh.agents, "_PROTOCOLS", dict(josh.agents._PROTOCOLS))
    monkeypatch.setattr(josh.envs, "OWN_DATA", dict(josh.envs.OWN_DATA))


@pytest.fixture(scope="session")
def tiny_smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved two-layer model of SmolLM2's architecture with its tokenizer (``tests.training_launch.tiny_base``)."""
    from tests.training_launch import tiny_base

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return tiny_base(tmp_path_factory.mktemp("tiny-smollm2"))


@pytest.fixture(scope="session")
def paper_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The authors' josh-train 0.1.4 wheel (their JOSH rollouts and ToolWOZ data), fetched once per session from the
    package index by josh's own ``paper_wheel`` (sha256 checked) into a fresh cache; ``$JOSH_PAPER_WHEEL`` names an
    already downloaded copy."""
    from josh.envs.toolwoz import paper_package

    given = os.environ.get("JOSH_PAPER_WHEEL")
    if given:
        return Path(given)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOSH_CACHE", str(tmp_path_factory.mktemp("josh-cache")))
        return paper_package.paper_wheel()


# How the suite shares out over pytest-xdist's workers (`make test`: --dist loadscope --no-loadscope-reorder, both
# xdist options). A test module is one unit, run on one worker, so its fixtures (a trained adapter, a served model, a
# Ray cluster) are built once. xdist hands the units out in collection order, which the hook below makes: the modules
# with a model-loading (slow) test first, so that no worker is left running one of them alone at the end while the
# other idles; the many short modules after them even out the end of the run. (xdist's `loadgroup` would also let
# modules that share a setup run as one unit, but under pytest 9.2 it silently groups nothing:
# pytest-dev/pytest-xdist#1386.)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules with a test marked ``slow`` first, each module's tests together and in their order."""
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow_modules)


# The suite's cost, printed at the end of every run (CI's log shows the next test that breaks the budget):
# the time spent per marker, setup and teardown included, beside pytest's --durations list of the slowest tests.
COST_MARKERS = ("vllm", "slow")  # a test counts under the first of these it carries, else under "fast"
_cost: dict[str, list[float]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    marker = next((name for name in COST_MARKERS if name in report.keywords), "fast")
    seconds, tests = _cost.setdefault(marker, [0.0, 0])
    _cost[marker] = [seconds + report.duration, tests + (report.when == "call")]


def pytest_terminal_summary(terminalreporter) -> None:
    if not _cost:
        return
    terminalreporter.section("time per marker (test seconds, summed over workers)")
    for marker, (seconds, tests) in sorted(_cost.items(), key=lambda item: -item[1][0]):
        terminalreporter.write_line(f"{marker:>6}: {seconds:8.1f} s over {tests} tests")


ECHO_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "josh-echo-env"


@pytest.fixture(scope="session")
def echo_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example plugin ``examples/josh-echo-env`` installed once per session (``tests.plugin_install``), put first
    on ``sys.path`` and on ``$PYTHONPATH`` for subprocesses: its ``.dist-info`` carries the entry points josh finds."""
    import importlib
    import sys

    from tests.plugin_install import install_plugin

    target = install_plugin(ECHO_PLUGIN, tmp_path_factory.mktemp("echo-plugin"))
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), before) if p)
    yield target
    sys.path.remove(str(target))
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before
