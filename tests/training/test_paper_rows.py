"""``josh train sft`` / ``kto`` on a handful of the rows imported from the authors' JOSH rollouts (slow): the rows
are what is tested, so the base is SmolLM2's tokenizer and template over a two-layer model of its architecture
(``tiny_smollm2``)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from josh.harvest.paper_archive import RECORD, ROLLOUTS_MEMBER
from josh.harvest.paper_import import import_paper
from josh.training.recipe import load_recipe
from tests.training_data import write_jsonl

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FIRST = 16  # rollouts imported: 5 SFT rows, both KTO labels
FAST = ["optim.logging_steps=1", "optim.gradient_accumulation_steps=1", "optim.max_steps=1"]


@pytest.fixture(scope="module")
def imported(paper_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``import_paper`` on the wheel's first 16 single-domain rollouts, as the archive holds them: their shortest rows
    are about as long as the whole import's, which takes 8 s more (its counts are checked in ``tests/harvest``)."""
    folder = tmp_path_factory.mktemp("paper")
    with zipfile.ZipFile(paper_wheel) as wheel, zipfile.ZipFile(io.BytesIO(wheel.read(ROLLOUTS_MEMBER))) as rollouts:
        members = sorted(m for m in rollouts.namelist() if RECORD.match(m) and "/sim_SNG" in m)[:FIRST]
        with zipfile.ZipFile(folder / "rollouts.zip", "w") as cut:
            for member in members:
                cut.writestr(member, rollouts.read(member))
    import_paper(folder / "rollouts.zip", folder / "rows")
    return folder / "rows"


def shortest(path: Path, n: int, label: bool | None = None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    chosen = [r for r in rows if label is None or r["label"] is label]
    return sorted(chosen, key=lambda r: len(json.dumps(r)))[:n]


@pytest.mark.parametrize("method", ["sft", "kto"])
def test_imported_rows_train_unchanged(method, imported, tiny_smollm2, tmp_path) -> None:
    from josh.training.runner import train

    if method == "sft":
        rows = shortest(imported / "sft.jsonl", 2)
    else:
        rows = shortest(imported / "kto.jsonl", 2, True) + shortest(imported / "kto.jsonl", 2, False)
    data = write_jsonl(tmp_path / f"{method}.jsonl", rows)
    recipe = load_recipe(
        ROOT / f"recipes/tiny-{method}.yaml",
        [*FAST, f"data={data}", f"output_dir={tmp_path}", f"model.name={tiny_smollm2}"],
    )
    run_dir = train(recipe)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 1 and metrics["loss_curve"]
    assert (run_dir / "adapter_model.safetensors").is_file()
