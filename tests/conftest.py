import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

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

# A test process holds millions of long-lived objects (τ²'s databases and tasks, torch, transformers, litellm), and
# CPython's default thresholds run a full collection over all of them every few hundred thousand allocations: a third
# of the CPU of the τ² tests (9 of 21 s in tests/envs/tau2/test_rewards.py). Rarer collections find the same garbage.
gc.set_threshold(10_000, 20, 100)

# ``$JOSH_SHARED_DATA`` points a worktree that is not beside ``shared/`` at the data.
SHARED_DATA = Path(os.environ.get("JOSH_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data beside the checkout (``../shared/data``); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
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


# Modules that pay the same large per-process setup run on one xdist worker, as one unit of --dist loadscope: τ²'s
# evaluator (3.3 s of imports, litellm's among them) with its domains' databases and tasks, which josh and the tests
# load once per process; OpenEnv's server stack (3.7 s of imports, gradio's among them). Split over two workers,
# both paid for each.
SHARED_SETUP = {
    "tau2": (
        "tests/envs/tau2/",
        "tests/loop/test_tau2.py",
        "tests/eval/test_tau2_export.py",
        "tests/users/test_tau2.py",
    ),
    "openenv": ("tests/envs/openenv/", "tests/run/test_openenv_server.py", "tests/run/test_trl_env.py"),
}


# The longest scopes of `make test`, longest first (test seconds summed, 2026-11-29): handed out before all others, so
# that no worker is left running one of them alone at the end while the other idles. xdist's own order puts the
# scopes with the most tests first, which put these modules of a few slow tests last. Only an order: a stale entry
# costs balance, never a test.
LONGEST_FIRST = (
    "tests/docs/test_runbook.py",  # ~380 s in make test-vllm (the GPU runbook rehearsed); skipped in make test
    "tests/cli/test_serve_real.py",  # ~160 s
    "tests/training/test_sharded.py",  # ~70 s
    "tests/loop/test_smollm2.py",  # ~65 s
    "tau2",  # ~60 s
    "tests/benchmarks/test_gpu_check_hf.py",  # ~60 s
    "tests/docs/test_tour.py",  # ~55 s
    "openenv",  # ~45 s
    "tests/envs/toolwoz/test_paper_reference.py",  # ~40 s, the paper install among it (test_paper_data waits for it)
    "tests/search/test_distributed.py",  # ~35 s
    "tests/training/test_ddp.py",  # ~30 s
    "tests/training/test_runs.py",  # ~30 s
    "tests/training/test_recipes.py",  # ~27 s
    "tests/llm/test_hf.py",  # ~24 s
    "tests/loop/test_kto_smollm2.py",  # ~22 s
    "tests/users/test_device_smollm2.py",  # ~20 s
    "tests/loop/test_launched.py",  # ~20 s
    "tests/envs/toolwoz/test_paper_data.py",  # ~15 s once the install is there
    "tests/training/test_ray_launch_configs.py",  # ~16 s
    "tests/training/test_grpo.py",  # ~14 s
)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: pytest without it runs the suite in one process
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` with the modules of each ``SHARED_SETUP`` group as one scope and the ``LONGEST_FIRST``
    scopes handed out first; other modes as they are."""
    if config.getoption("dist") != "loadscope":
        return None
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    def rank(scope: str) -> int:
        module = scope.split("::")[0]  # a test class is a scope of its own
        return next((i for i, name in enumerate(LONGEST_FIRST) if module == name), len(LONGEST_FIRST))

    class SharedSetupScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return next((group for group, paths in SHARED_SETUP.items() if scope.startswith(paths)), scope)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is complete at the first assignment; sorted() keeps xdist's order after
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda unit: rank(unit[0])))
                self.ordered = True
            super()._assign_work_unit(node)

    return SharedSetupScheduling(config, log)


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
    """The example plugin ``examples/josh-echo-env`` installed once per session (``pip install --no-deps
    --no-build-isolation --target``, from a copy so the build leaves nothing in the checkout), put first on
    ``sys.path`` and on ``$PYTHONPATH`` for subprocesses: its ``.dist-info`` carries the entry points josh finds."""
    import importlib
    import shutil
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("echo-plugin")
    source, target = root / "src", root / "site"
    shutil.copytree(ECHO_PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(target), str(source)], check=True)
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
