"""Human-readable views of a loop: its ``report.json`` (``LoopReport``), or several seeds' (``SeedsReport``),
as ``report.md`` with PNG plots and as terminal tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from josh.eval.compare import ComparisonEntry
from josh.eval.metrics import Interval
from josh.eval.summary import fmt_interval
from josh.loop.pooling import SeedsReport, increment_line
from josh.loop.report import START_DRAWS, HarvestEntry, LoopReport, ModelEntry, headline_text
from josh.run.diagnostics import markdown_section
from josh.util.atomic import write_atomic
from josh.util.layout import REPORT_JSON, REPORT_MD

TERMINAL_HIDDEN = {"searched with", "used (trimmed)", "search wall"}  # columns only report.md shows


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _print_table(console: Console, title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def start_draws_text(report: LoopReport) -> str | None:
    """One line: the newest policy against the start's two training draws, when the loop trained control-retrain."""
    c = next((c for c in report.comparisons if c.baseline == START_DRAWS), None)
    if c is None:
        return None
    return (
        f"Against the start's two training draws (warm start and control-retrain averaged per task; not the "
        f"headline): {fmt_interval(c.interval, signed=True)} ({c.better} better, {c.worse} worse)"
    )


def model_name(m: ModelEntry) -> str:
    """The model's label, with its training seeds' rewards when its average reward pools several."""
    if not m.seed_rewards:
        return m.label
    return f"{m.label} ({len(m.seed_rewards)} training seeds: {', '.join(f'{r:.3f}' for r in m.seed_rewards)})"


def model_rows(models: list[ModelEntry]) -> tuple[list[str], list[list[str]]]:
    """Reward, success, pass^k, error shares and cost of every evaluated model."""
    ks = sorted({k for m in models for k in m.summary.pass_k})
    header = ["model", "round", "average reward [95% CI]", "100% success [95% CI]"]
    header += [f"pass^{k}" for k in ks] + ["malformed", "bad API use", "LLM calls", "tokens", "wall"]
    rows = []
    for m in models:
        s = m.summary
        rows.append(
            [model_name(m), str(m.round), fmt_interval(s.average_reward), fmt_interval(s.success_rate)]
            + [f"{s.pass_k.get(k, 0.0):.3f}" for k in ks]
            + [f"{s.malformed_share:.1%}", f"{s.bad_api_use_share:.1%}", f"{s.llm_calls:,}"]
            + [f"{s.prompt_tokens + s.completion_tokens:,}", f"{s.wall_s:.0f} s"]
        )
    return header, rows


def curve_rows(report: LoopReport) -> tuple[list[str], list[list[str]]]:
    """Average reward [95% CI] per round (rows) and arm (columns); round 0 is the policy that searched first."""
    arms = list(dict.fromkeys(m.arm for m in report.models if m.round > 0))
    start = report.model(report.start) if report.start else None
    rounds = sorted({m.round for m in report.models if m.round > 0})
    searched = {h.round: h.policy for h in report.harvest}
    rows = []
    if start is not None:
        rows.append(["0", "-", *[fmt_interval(start.summary.average_reward) for _ in arms]])
    for r in rounds:
        cells = {m.arm: fmt_interval(m.summary.average_reward) for m in report.models if m.round == r}
        rows.append([str(r), searched.get(r, "-"), *[cells.get(a, "-") for a in arms]])
    return ["round", "searched with", *arms], rows


def harvest_rows(report: LoopReport) -> tuple[list[str], list[list[str]]]:
    """Per round: trees searched and rewarded, rows and tokens harvested, LLM calls, yield per 100 calls."""
    header = ["round", "searched with", "trees", "rewarded", "used (trimmed)", "SFT rows / tokens"]
    header += ["KTO good + bad / tokens", "LLM calls", "rewarded per 100 calls", "search wall"]
    control = any(h.control_rows is not None for h in report.harvest)
    header += ["control-random rows / tokens (met a goal)"] if control else []
    tree = any(h.tree_rows is not None for h in report.harvest)
    header += ["tree rows (groups used / equal skipped)"] if tree else []
    gate = any(h.gate_replies is not None for h in report.harvest)
    header += ["judge gate: removed (to KTO) / failed of replies"] if gate else []
    rows = []
    for h in report.harvest:
        row = [str(h.round), h.policy, str(h.trees), str(h.rewarded), f"{h.accepted} ({h.trimmed})"]
        row += [f"{h.sft_rows} / {h.sft_tokens:,}", f"{h.kto_good} + {h.kto_bad} / {h.kto_tokens:,}"]
        row += [f"{h.llm_calls:,}", f"{h.rewarded_per_100_calls:.2f}", f"{h.search_wall_s:.0f} s"]
        if control:
            row += [_control_cell(h)]
        if tree:
            groups, zero = h.tree_groups or 0, h.tree_zero_groups or 0
            row += ["-" if h.tree_rows is None else f"{h.tree_rows} ({groups - zero} / {zero})"]
        if gate:
            row += [_gate_cell(h)]
        rows.append(row)
    return header, rows


def _gate_cell(h: HarvestEntry) -> str:
    """The judge gate's removed turns (routed to KTO) and failed judgements, of the replies it looked at."""
    if h.gate_replies is None:
        return "-"
    return f"{h.gate_removed} ({h.gate_to_kto}) / {h.gate_failed} of {h.gate_replies}"


def _control_cell(h: HarvestEntry) -> str:
    """control-random's rows / tokens, and how many of its branches met a goal (runs before the count: not shown)."""
    if h.control_rows is None:
        return "-"
    met = "" if h.control_rewarded is None else f" ({h.control_rewarded})"
    return f"{h.control_rows} / {h.control_tokens or 0:,}{met}"


def comparison_rows(items: list[ComparisonEntry]) -> tuple[list[str], list[list[str]]]:
    """Paired comparisons: model, baseline, what the pair measures, difference [95% CI], tasks moved."""
    header = ["model", "compared with", "measures", "average reward difference [95% CI]", "better", "worse", "tasks"]
    rows = [
        [c.model, c.baseline, c.role, fmt_interval(c.interval, signed=True), str(c.better), str(c.worse), str(c.tasks)]
        for c in items
    ]
    return header, rows


def training_rows(report: LoopReport) -> tuple[list[str], list[list[str]]]:
    rows = [
        [t.name, str(t.rows), str(t.steps), f"{t.tokens:,}", "-" if t.loss is None else f"{t.loss:.4f}"]
        + [f"{t.wall_s:.0f} s"]
        for t in report.training
    ]
    return ["run", "rows", "steps", "tokens seen", "final loss", "wall"], rows


def stage_rows(report: LoopReport) -> tuple[list[str], list[list[str]]]:
    """Each stage's wall time beside the load averages when it started and finished (1 / 5 / 15 minutes)."""

    def load(values: list[float] | None) -> str:
        return "-" if values is None else " / ".join(f"{v:.1f}" for v in values)

    rows = [
        [s.name, s.folder, "-" if s.wall_s is None else f"{s.wall_s:.0f} s", load(s.load_start), load(s.load_end)]
        if s.complete
        else [s.name, s.folder, "unfinished", load(s.load_start), "-"]
        for s in report.stages
    ]
    return ["stage", "folder", "wall", "load at start", "load at end"], rows


def cost_rows(report: LoopReport) -> tuple[list[str], list[list[str]]]:
    """LLM calls and tokens behind each model (its training data's searches or rollouts), beside its reward."""
    rewards = {m.label: fmt_interval(m.summary.average_reward) for m in report.models}
    rows = [[c.label, c.spent_on, f"{c.llm_calls:,}", f"{c.tokens:,}", rewards.get(c.label, "-")] for c in report.costs]
    return ["model", "LLM calls spent on", "LLM calls", "tokens", "average reward [95% CI]"], rows


def note_lines(report: LoopReport) -> list[str]:
    return [f"{n.arm}{f' (round {n.round})' if n.round else ''}: {n.message}" for n in report.notes]


def write_loop_markdown(report: LoopReport, run_dir: Path) -> Path:
    """``<run>/report.md`` from a ``LoopReport``, with PNG plots under ``<run>/plots/``."""
    from josh.loop.plots import plot_errors, plot_reward, plot_rounds  # heavy: matplotlib

    plots = run_dir / "plots"
    lines = [f"# {report.title}", "", f"**{headline_text(report)}**", ""]
    if (steadier := start_draws_text(report)) is not None:
        lines += [steadier, ""]
    if report.unfinished:
        lines += [f"The loop has not finished: the next stage is {report.unfinished!r}.", ""]
    models = report.models
    if models:
        first = models[0].summary
        lines += [
            f"Every model is evaluated on the same {first.tasks} held-out tasks x {first.trials} trial(s). Intervals "
            "are 95% percentile bootstrap intervals over tasks."
            + (
                " A model trained at several training seeds (`train_seeds`) has its average reward, and every "
                "comparison, pooled per task over its seeds; its other metrics are those of its first seed."
                if any(m.seed_rewards for m in models)
                else ""
            ),
            "",
            *_md_table(*model_rows(models)),
            "",
            f"![Average reward and 100% success per model](plots/{plot_reward(models, plots / 'reward.png').name})",
            "",
            f"![Error categories per model](plots/{plot_errors(models, plots / 'errors.png').name})",
            "",
        ]
    header, rows = curve_rows(report)
    if len(header) > 2 and rows:
        lines += ["## Reward per round", "", *_md_table(header, rows), ""]
        figure = plot_rounds(models, report.start, plots / "rounds.png")
        lines += [f"![Average reward per round](plots/{figure.name})", ""] if figure else []
    if report.harvest:
        counter = report.harvest[0].token_counter
        lines += ["## Harvest", "", f"Tokens counted with the {counter} tokenizer.", ""]
        lines += [*_md_table(*harvest_rows(report)), ""]
    if any(c.round > 0 for c in report.costs):
        lines += [
            "## Cost per model",
            "",
            "LLM calls (agent and user) and tokens spent producing each model's training data: a JOSH arm's model of "
            "round R learned from the searches of rounds 1..R, a GRPO model from its own training rollouts.",
            "",
            *_md_table(*cost_rows(report)),
            "",
        ]
    if report.comparisons:
        lines += [
            "## Paired comparisons",
            "",
            "Per-task reward differences on the same held-out tasks, with 95% bootstrap intervals over tasks; an "
            "interval above zero supports an improvement.",
            "",
            *_md_table(*comparison_rows(report.comparisons)),
            "",
        ]
    lines += markdown_section([(m.label, m.summary.diagnostics) for m in models])
    if report.notes:
        lines += ["## Arms that ended without a model", "", *[f"- {line}" for line in note_lines(report)], ""]
    if report.training:
        lines += ["## Training", "", *_md_table(*training_rows(report)), ""]
    if report.stages:
        lines += [
            "## Stages",
            "",
            "Wall time of each stage's last run (a resumed stage: since it resumed) and the machine's load averages "
            "over 1, 5 and 15 minutes when it started and ended.",
            "",
            *_md_table(*stage_rows(report)),
            "",
        ]
    path = run_dir / REPORT_MD
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def print_loop_report(report: LoopReport, console: Console) -> None:
    """The report's tables on the terminal, the headline last."""
    header, rows = model_rows(report.models)
    keep = [0, 1, 2, 3, len(header) - 3, len(header) - 2, len(header) - 1]  # model, round, reward, success, cost
    _print_table(console, "held-out evaluation (95% bootstrap intervals)", [header[i] for i in keep],
                 [[r[i] for i in keep] for r in rows])  # fmt: skip
    header, rows = curve_rows(report)
    if len(rows) > 2:
        _print_table(console, "average reward per round", header, rows)
    if report.harvest:
        header, rows = harvest_rows(report)
        keep = [i for i, name in enumerate(header) if name not in TERMINAL_HIDDEN]
        _print_table(console, "harvest per round", [header[i] for i in keep], [[r[i] for i in keep] for r in rows])
    if any(c.round > 0 for c in report.costs):
        _print_table(console, "LLM calls behind each model", *cost_rows(report))
    shown = [c for c in report.comparisons if c.role != "vs base"]
    if shown:
        _print_table(console, "paired comparisons (per-task differences)", *comparison_rows(shown))
    for line in note_lines(report):
        console.print(f"[yellow]ended:[/yellow] {line}", highlight=False)
    if (steadier := start_draws_text(report)) is not None:
        console.print(steadier, highlight=False)
    console.print(f"[bold]{headline_text(report)}[/bold]", highlight=False)


def seed_rows(report: SeedsReport) -> tuple[list[str], list[list[str]]]:
    """Each seed's JOSH increment (or why it has none)."""
    rows = []
    for run in report.runs:
        c = run.headline
        cell = fmt_interval(c.interval, signed=True) if c else run.headline_text.split(": ", 1)[-1]
        moved = [str(c.better), str(c.worse), "yes" if c.low > 0 else "no"] if c else ["-", "-", "no"]
        rows.append([str(run.seed), run.run_dir, c.model if c else "-", cell, *moved])
    return ["seed", "folder", "JOSH model", "increment [95% CI]", "better", "worse", "above zero"], rows


def pooled_rows(report: SeedsReport) -> tuple[list[str], list[list[str]]]:
    """Every comparison pooled over seeds, with each seed's mean and their spread."""
    header = ["model", "compared with", "measures", "pooled difference [95% CI]", "tasks", "per seed"]
    header += ["sd (tasks, draws)", "seeds above / below zero"]
    rows = []
    for p in [report.headline, *report.comparisons] if report.headline else report.comparisons:
        per_seed = ", ".join("-" if d is None else f"{d:+.3f}" for d in p.per_seed)
        iv = Interval(mean=p.difference, low=p.low, high=p.high)
        rows.append(
            [p.model, p.baseline, p.role, fmt_interval(iv, signed=True), str(p.tasks), per_seed]
            + [f"{p.spread_sd:.3f} ({p.sampling_sd:.3f}, {p.draw_sd:.3f})", f"{p.above_zero} / {p.below_zero}"]
        )
    return header, rows


def write_seeds_markdown(report: SeedsReport, run_dir: Path) -> Path:
    """``<run>/report.md`` of several seeds: each seed's increment, then every comparison pooled."""
    lines = [f"# {report.title}", ""]
    if report.headline is not None:
        lines += [f"**{increment_line(report.headline)}**", ""]
    lines += [
        "JOSH increment: the newest model of the policy arm minus the policy that ran the first search, per held-out "
        "task. Pooled: each task's difference averaged over the seeds, 95% bootstrap interval over tasks; a seed "
        "that trained no JOSH model counts as 0 and an unfinished one is left out. 'Seeds excluding zero' counts "
        "the pooled seeds whose own interval lies above zero. sd: the spread of the per-seed means; in brackets, the "
        "part that sampling the held-out tasks explains (each seed's standard error, root mean square) and the part "
        "the models' own draws add (training seeds, the search's samples). More held-out tasks shrink the first "
        "only. Each seed's full report is in its folder.",
        "",
        "## Seeds",
        "",
        *_md_table(*seed_rows(report)),
        "",
        "## Pooled comparisons",
        "",
        *_md_table(*pooled_rows(report)),
        "",
    ]
    unfinished = [f"- {r.run_dir}: stopped before {r.unfinished!r}" for r in report.runs if r.unfinished]
    lines += ["## Unfinished seeds (left out of the pool)", "", *unfinished, ""] if unfinished else []
    path = run_dir / REPORT_MD
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def print_seeds_report(report: SeedsReport, console: Console) -> None:
    """The combined report on the terminal, the pooled increment last."""
    _print_table(console, "JOSH increment per seed", *seed_rows(report))
    _print_table(console, "comparisons pooled over seeds", *pooled_rows(report))
    if report.headline is not None:
        console.print(f"[bold]{increment_line(report.headline)}[/bold]", highlight=False)


def save_report(report: LoopReport, run_dir: Path) -> Path:
    """Write ``report.json`` and ``report.md`` (with its plots) into ``run_dir``; returns the Markdown file."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / REPORT_JSON, report.model_dump_json(indent=2) + "\n")
    return write_loop_markdown(report, run_dir)
