"""The documentation keeps up with the code: the README stays a front door, the CLI reference names every command
and option, the architecture page names every module, the pages are no lab notebook (history is in CHANGELOG.md)
and their examples run (``make docs`` checks links and the nav)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from josh.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_readme_stays_short_and_points_at_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 400
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), f"README links to {link}, which does not exist"


def commands(command, path: str):
    """(command path, its option and argument names, hidden ones left out) for the command and every subcommand."""
    names = set()
    for param in command.params:
        if getattr(param, "hidden", False):  # a removed flag kept only to refuse it with a clear error
            continue
        names.update(name for name in (*param.opts, *param.secondary_opts) if name.startswith("-"))
        if param.param_type_name == "argument":
            names.add(param.name)
    yield path, names - {"--help"}
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, f"{path} {name}")


def test_the_cli_reference_names_every_command_and_option():
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    regenerate = "regenerate it: python scripts/cli_reference.py > docs/cli.md"
    for path, names in commands(get_command(app), "josh"):
        heading = re.search(rf"^#+ `{re.escape(path)}`$", page, re.M)
        assert heading, f"docs/cli.md has no section for `{path}`; {regenerate}"
        section = page[heading.end() :].split("\n## ", 1)[0].split("\n### `", 1)[0]
        missing = sorted(name for name in names if not re.search(rf"`[^`]*{re.escape(name)}\b", section))
        assert not missing, f"docs/cli.md's `{path}` lacks {missing}; {regenerate}"


def test_the_architecture_page_names_every_module():
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    listed: dict[str, set[str]] = {}
    package = None
    for line in page.splitlines():
        if heading := re.match(r"#+ `(josh(?:/[\w/]+)?)/`", line):
            package = heading.group(1)
            listed.setdefault(package, set())
        elif package and (row := re.match(r"\| `([\w/]+?)(\.py|/)` \|", line)):
            listed[package].add(row.group(1))
    grouped = re.findall(r"`(josh/[\w/]+)/` and `(josh/[\w/]+)/`", page)
    for module in sorted((ROOT / "josh").rglob("*.py")):
        if module.name == "__init__.py" or "__pycache__" in module.parts:
            continue
        folder = module.parent.relative_to(ROOT).as_posix()
        name = module.stem
        if folder in listed and name in listed[folder]:
            continue
        # a package documented as a folder row of its parent (prompts/, templates/), or a grouped domain package
        parent, _, leaf = folder.rpartition("/")
        if parent in listed and leaf in listed[parent]:
            continue
        domain = next((p for pair in grouped for p in pair if folder == p or folder.startswith(p + "/")), None)
        if domain and f"`{name}.py`" in page:
            continue
        raise AssertionError(f"docs/architecture.md does not list {module.relative_to(ROOT)}")
    for folder, names in listed.items():
        for name in names:
            assert (ROOT / folder / f"{name}.py").is_file() or (ROOT / folder / name).is_dir(), (
                f"docs/architecture.md lists {folder}/{name}, which does not exist"
            )


# a diary's words: which of the project's working sessions measured or changed what ("the ninth session", "across
# two sessions"); a run's own sessions (a resumed run's `session_wall_s`) are not meant
DIARY = re.compile(
    r"\b(?:(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|previous|same|earlier"
    r"|last) session|(?:across|between) (?:two |several )?sessions|other sessions')",
    re.I,
)
# a timing aside: a figure with the load it was measured at, which belongs on the benchmarks page
TIMING = re.compile(r"\bload(?: average)? (?:near |of )?\d", re.I)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_pages_keep_no_session_diary():
    found = [
        f"{page.relative_to(ROOT)}:{number}: {match.group(0)!r}"
        for page in _pages()
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if (match := DIARY.search(line))
    ]
    assert not found, "history belongs in CHANGELOG.md, not in the docs: " + "; ".join(found)


def test_the_tour_and_the_extending_page_keep_no_timing_asides():
    for name in ("README.md", "docs/tour.md", "docs/extending.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not TIMING.search(text), f"{name} times something at a load; that figure belongs in docs/benchmarks.md"


def test_the_changelog_keeps_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases and releases[0][0] == "Unreleased", "the first section is ## [Unreleased]"
    headings = re.findall(r"^(#+) (.*)$", text, re.M)
    kinds = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    for level, title in headings[1:]:
        assert (level == "##" and re.match(r"\[[^\]]+\]", title)) or (level == "###" and title in kinds), (
            f"CHANGELOG.md heading {level} {title!r} is neither a release nor one of {sorted(kinds)}"
        )
    assert any(level == "###" for level, _ in headings), "the changelog lists no change"


def test_the_toolwoz_example_of_the_environments_page_runs(capsys):
    page = (DOCS / "concepts" / "environments.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "ToolWOZEnv" in b)
    exec(compile(block, "docs/concepts/environments.md", "exec"), {})
    out = capsys.readouterr().out
    assert '"area": "north"' in out and '"stars": "4"' in out, out  # a served hotel that fits the search
