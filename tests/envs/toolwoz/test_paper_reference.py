"""josh's paper ToolWOZ against the authors' own derivation: their ``create_apis`` (``josh_train/utils.py``) and
their split rule (``josh_train/main.py: ToolWOZEnvironment``), run from the same wheel (MIT) on the same files (each
dialogue cut to the parts their derivation reads).

Every split must hold the same task ids in the same order, every task the same goal calls; where josh differs on
purpose (``docs/concepts/toolwoz-paper-data.md``) the task says so in ``details.repairs`` and only the entity it names (or
the name constraint it spells as the database does) differs. Slow: the authors' pandas derivation of all 7,849 tasks,
every one of which the goals test compares (about 40 s).
"""

import json
import shutil
import sys
import types
import warnings
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import pytest

from josh.envs.toolwoz.data import load_toolwoz
from josh.envs.toolwoz.normalize import is_no_constraint
from josh.envs.toolwoz.paper_package import paper_wheel
from josh.envs.toolwoz.task import ENTITY_KEY

pytestmark = pytest.mark.slow

# What the authors' modules import but their derivation never uses (pandasql is not even installed here).
_STUBS = {
    "pandasql": {},
    "tiktoken": {},
    "dotenv": {"load_dotenv": lambda *args, **kwargs: None},
    "colorama": {name: types.SimpleNamespace() for name in ("Back", "Fore", "Style")},
    "openai": {"OpenAI": object},
}
_EMPTY = {"", "dont care", "not mentioned", "don't care", "dontcare", "do n't care"}  # their test_if_val_is_empty


@pytest.fixture(scope="module")
def authors(paper_install, tmp_path_factory: pytest.TempPathFactory):
    """The authors' ToolWOZ environment built in a folder laid out as their code expects (``data/``, ``db/``)."""
    pytest.importorskip("pandas")
    from josh.envs.toolwoz.paper_data import paper_dir

    root = tmp_path_factory.mktemp("authors")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOSH_CACHE", str(paper_install.cache))
        with zipfile.ZipFile(paper_wheel()) as wheel:
            wanted = [
                m
                for m in wheel.namelist()
                if m.startswith(("josh_train/", "db/")) or m.startswith("data/") and m.endswith(".json")
            ]
            wheel.extractall(root, wanted)
        for name, keep in _READ.items():
            _cut(paper_dir() / name, root / "data" / name, keep)
        for name, attrs in _STUBS.items():
            stub = types.ModuleType(name)
            stub.__dict__.update(attrs)
            patch.setitem(sys.modules, name, stub)
        patch.chdir(root)
        patch.syspath_prepend(str(root))
        with _object_strings():
            from josh_train.main import ToolWOZEnvironment  # noqa: PLC0415  (the authors' module, from the wheel)

            env = ToolWOZEnvironment(types.SimpleNamespace(task_split="test", model="gpt-4o"))
        for module in [m for m in sys.modules if m.split(".")[0] == "josh_train"]:
            del sys.modules[module]
    shutil.rmtree(root / "josh_train")
    return env


_READ: dict[str, Callable[[dict], dict]] = {
    "data.json": lambda dialogue: {"goal": dialogue["goal"]},
    "delex.json": lambda dialogue: {"log": dialogue["log"][-2:]},
}
"""What of each dialogue the authors' derivation reads (``create_apis``: the goal, and the metadata of the last turn
or the one before it); ``ToolWOZEnvironment`` loads both files whole twice over (390 MB), for other uses."""


def _cut(source: Path, target: Path, keep: Callable[[dict], dict]) -> None:
    """``source``, a file of dialogues by id, with each dialogue cut to what the derivation reads (``_READ``)."""
    dialogues = json.loads(source.read_bytes())
    target.write_text(json.dumps({key: keep(dialogue) for key, dialogue in dialogues.items()}), encoding="utf-8")


@contextmanager
def _object_strings() -> Iterator[None]:
    """Text columns as Python objects, pandas' default before 3.0 (the authors' pandas): on pandas 3's Arrow-backed
    strings their per-task queries (``queryDataBase``: filter, then ``iterrows``) take three times as long, on the
    same values (a missing one is NaN either way). A pandas without the switch runs as it is."""
    import pandas as pd

    try:
        pd.get_option("future.infer_string")
        switch: AbstractContextManager = pd.option_context("future.infer_string", False)
    except pd.errors.OptionError:
        switch = nullcontext()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infer_string")  # pandas 3 says the switch goes in pandas 4
        with switch:
            yield


def _their_goals(record: dict) -> dict[str, dict[str, object]]:
    return {
        name: {k: v for k, v in goal["parameters"].items() if not (isinstance(v, str) and v in _EMPTY)}
        for domain in record.values()
        for name, goal in domain["success"].items()
    }


def test_split_ids_are_the_authors(authors, paper_toolwoz: Path) -> None:
    splits = load_toolwoz("toolwoz").splits
    theirs = {
        "train": authors.train_ids,
        "val": authors.val_ids,
        "test": authors.test_ids,
        "full_test": authors.test_ids_full,
    }
    for split, ids in theirs.items():
        assert [f"{t.id}.json" for t in splits[split]] == ids, split
    assert len(authors.apis) == 7849


def test_goal_calls_are_the_authors_except_the_documented_repairs(authors, paper_toolwoz: Path) -> None:
    tasks = {t.id: t for tasks in load_toolwoz("toolwoz").splits.values() for t in tasks}
    differ: dict[str, set[str]] = {}
    for task_id, task in tasks.items():
        theirs = _their_goals(authors.apis[f"{task_id}.json"])
        ours = {g.name: {k: v for k, v in g.parameters.items() if not is_no_constraint(v)} for g in task.goals}
        assert sorted(ours) == sorted(theirs), task_id
        repairs = task.details.get("repairs", {})
        for name, params in ours.items():
            domain = name.split("_", 1)[1]
            differing = {k for k in params.keys() | theirs[name].keys() if params.get(k) != theirs[name].get(k)}
            if differing:
                assert domain in repairs and differing <= {ENTITY_KEY[domain]}, (task_id, name, differing)
                differ.setdefault(task_id, set()).add(name)
    assert differ["MUL0225"] == {"book_train"}  # their TR2860 runs on Friday, the goal says Thursday
    assert authors.apis["MUL0023.json"]["hotel"]["success"]["book_hotel"]["unique_id"] == "cb41da"  # a postcode
    assert differ["MUL0023"] == {"book_hotel"}
