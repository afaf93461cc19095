"""The README and the guides beside it cannot drift from the code: every ``consumer-offsets``
command in their shell blocks parses with the real CLI parser (and each sub-command's ``--help``
exits 0), every relative link points at a file (and heading) that exists, and the README stays
a short user's guide. No service is started: the parsers are the CLI's own."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import re
import shlex
from pathlib import Path

import pytest

from connectors.kafka.local.cli import _parser as local_kafka_parser
from streaming.cli.main import PROG, build_parser, main
from streaming.config import JobConfig, load_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = (
    README,
    ROOT / "deploy" / "README.md",
    ROOT / "tests" / "bench" / "README.md",
    ROOT / "tests" / "soak" / "README.md",
    ROOT / "tests" / "conformance" / "README.md",
)
#: The issue asked for about 300 lines; a few more are tolerated, not a notebook again.
MAX_README_LINES = 320
#: How the guides spell the CLI at the start of a command line.
PROGRAMS = frozenset({PROG, f".venv/bin/{PROG}", "$cli"})

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def shell_lines(text: str) -> list[str]:
    """The lines of the ``bash`` fenced blocks, backslash continuations joined."""
    lines: list[str] = []
    for language, body in _FENCE.findall(text):
        if language in {"bash", "sh", "shell"}:
            lines.extend(body.replace("\\\n", " ").splitlines())
    return lines


def cli_commands(path: Path) -> list[tuple[str, list[str]]]:
    """Each ``consumer-offsets`` command line of ``path``'s shell blocks: (the line, its
    arguments after the program), comments dropped as the shell drops them."""
    commands = []
    for line in shell_lines(path.read_text(encoding="utf-8")):
        words = line.split(maxsplit=1)
        if words and words[0] in PROGRAMS:
            commands.append((line.strip(), shlex.split(line, comments=True)[1:]))
    return commands


def _all_commands() -> list[tuple[str, list[str]]]:
    return [command for guide in GUIDES for command in cli_commands(guide)]


def _command_params() -> list[object]:
    return [pytest.param(line, args, id=" ".join(args)) for line, args in _all_commands()]


@functools.cache
def _cli_parser() -> argparse.ArgumentParser:
    return build_parser()


def _parse(arguments: list[str]) -> str:
    """Parse ``arguments`` as the CLI does; returns argparse's complaint, empty when none."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            if arguments[:1] == ["kafka"]:
                local_kafka_parser(f"{PROG} kafka").parse_args(arguments[1:])
            else:
                parsed = _cli_parser().parse_args(arguments)
                if parsed.command is None:
                    return "no command"
    except SystemExit as exc:
        return errors.getvalue() or f"exit {exc.code}"
    return ""


def test_the_readme_shows_the_cli_at_work() -> None:
    commands = [arguments[0] for _, arguments in cli_commands(README) if arguments]
    # The sequences a newcomer follows: the job, the writes, the reads, the services.
    for expected in ("run", "commit", "describe", "reset-offsets", "mirror", "serve", "status"):
        assert expected in commands, f"README shows no `{PROG} {expected}`"


@pytest.mark.parametrize(("line", "arguments"), _command_params())
def test_each_command_shown_parses(line: str, arguments: list[str]) -> None:
    assert arguments, f"{line!r}: no command after the program"
    assert _parse(arguments) == "", f"{line!r} does not parse: {_parse(arguments)}"


def _subcommands() -> list[list[str]]:
    seen: dict[str, list[str]] = {}
    for _, arguments in _all_commands():
        path = arguments[:2] if arguments[:1] == ["kafka"] else arguments[:1]
        seen.setdefault(" ".join(path), path)
    return list(seen.values())


@pytest.mark.parametrize("subcommand", _subcommands(), ids=" ".join)
def test_each_subcommand_shown_has_help(subcommand: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main([*subcommand, "--help"], stdout=out, stderr=err) == 0, err.getvalue()
    assert "usage:" in out.getvalue()


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of ``path``'s headings: lower case, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#+ (.+)$", _FENCE.sub("", path.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(guide: Path) -> None:
    broken = []
    for target in _LINK.findall(guide.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (guide.parent / file_part).resolve() if file_part else guide
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
        ):
            broken.append(target)
    assert not broken, f"{guide.relative_to(ROOT)}: links to nothing: {broken}"


def test_every_job_setting_is_in_the_configuration_table() -> None:
    rows = set(re.findall(r"^\| `(\w+)` \|", README.read_text(encoding="utf-8"), re.MULTILINE))
    missing = [f.name for f in dataclasses.fields(JobConfig) if f.name not in rows]
    assert not missing, f"README's configuration table lacks {missing}"


def test_the_readme_python_loads_configuration_files_the_repository_has() -> None:
    """Each ``load_config(...)`` of the README's Python blocks names a file a fresh clone has,
    which loads; the blocks compile."""
    blocks = [body for lang, body in _FENCE.findall(README.read_text("utf-8")) if lang == "python"]
    paths = [path for body in blocks for path in re.findall(r'load_config\("([^"]+)"\)', body)]
    assert paths, "the README's client example loads no configuration"
    for body in blocks:
        compile(body, "README.md", "exec")
    for path in paths:
        assert (ROOT / path).is_file(), f"the README loads {path}, which the repository lacks"
        load_config(ROOT / path, env={})


def test_readme_stays_a_short_guide() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


def test_command_extraction_sees_continuations_and_comments(tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(
        "```bash\n$cli describe --group g   # a comment\n"
        "consumer-offsets mirror --cluster-name prod \\\n    --sink-url sqlite:///m.db\n"
        "echo not the cli\n```\n```python\nconsumer-offsets list\n```\n"
    )
    assert [arguments for _, arguments in cli_commands(guide)] == [
        ["describe", "--group", "g"],
        ["mirror", "--cluster-name", "prod", "--sink-url", "sqlite:///m.db"],
    ]
    assert _parse(["describe", "--no-such-flag"]) != ""
