"""Every file josh writes into a run folder, by name, so what a folder holds is looked up (or changed) in one place.

A ``josh rollout`` folder: ``TREES``, ``ROLLOUT_STATS``, ``ROLLOUT_LOG``. A ``josh eval`` folder: ``RESULTS``,
``SUMMARY``, ``EVAL_LOG``. A ``josh extract`` folder: ``<format>.jsonl`` for each format (``rows_file``) and
``EXTRACT_STATS``, and with ``extract.judge`` the judge gate's cached verdicts ``JUDGE_GATE``. A training run:
``TRAIN_RECIPE``, ``METRICS``, ``TRAIN_LOG`` beside the adapter (``LAUNCH_LOG``: the output of a loop's ``accelerate
launch``). A ``josh loop`` run: ``LOOP_RECIPE`` (or
``SEEDS_RECIPE`` above its ``seed-<k>/`` runs), ``REPORT_JSON``, ``REPORT_MD``, and one folder per stage with its
``MANIFEST`` (a training stage that ended without a model: ``TRAIN_ENDED``). A ``josh arena`` folder:
``ARENA_JUDGEMENTS``, ``ARENA_SUMMARY``, ``ARENA_PLOT``.
"""

TREES = "trees.jsonl"
ROLLOUT_STATS = "stats.json"
ROLLOUT_LOG = "rollout.log"

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
EVAL_LOG = "eval.log"
MATRIX_JSON = "matrix.json"
MATRIX_MD = "matrix.md"
MATRIX_CONFIG = "matrix_config.json"
JUDGEMENTS = "judgements.jsonl"
JUDGE_SUMMARY = "judge_summary.json"
ARENA_JUDGEMENTS = "arena_judgements.jsonl"
ARENA_SUMMARY = "arena_summary.json"
ARENA_PLOT = "arena.png"

EXTRACT_STATS = "extract_stats.json"
JUDGE_GATE = "judge_gate.jsonl"
WARMSTART_ROWS = "sft.jsonl"
WARMSTART_STATS = "warmstart_stats.json"

TRAIN_RECIPE = "recipe.yaml"
TRAIN_DATA = "data.jsonl"
METRICS = "metrics.json"
TRAIN_LOG = "train.log"
LAUNCH_LOG = "launch.log"

LOOP_RECIPE = "loop.yaml"
SEEDS_RECIPE = "seeds.yaml"
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
MANIFEST = "manifest.json"
TRAIN_ENDED = "ended.txt"

VIEW_INDEX = "index.html"
SERVED_MARKER = "josh-served.json"


def rows_file(fmt: str) -> str:
    """The rows of one training-data format (``sft``, ``kto``, ``dpo``, ``tree``): ``<format>.jsonl``."""
    return f"{fmt}.jsonl"
