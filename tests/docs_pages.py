"""What the documentation says, read from its Markdown: the commands it tells a reader to run, its links, the
paths and variables it names, and the measured figures it states (tests/test_readme_commands.py, tests/test_docs.py).

Pure functions over text, so that each check can also be shown to fail on a planted mistake.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"

# Folders that hold no documentation of the project (tools' caches, virtual environments, build output).
NOT_DOCS = {".venv", "node_modules", "cdk.out", "build", ".sagebox", ".git"}


def reader_pages(repo: Path = REPO) -> list[Path]:
    """The pages a newcomer is sent through: README.md and docs/*.md."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def all_pages(repo: Path = REPO) -> list[Path]:
    """Every Markdown page of the repository (README, docs/, the packages' and data sets' READMEs)."""
    pages = []
    for folder, subfolders, files in os.walk(repo):
        subfolders[:] = [name for name in subfolders if name not in NOT_DOCS and not name.startswith(".")]
        pages += [Path(folder) / name for name in files if name.endswith(".md")]
    return sorted(pages)


# --- Markdown structure --------------------------------------------------------------------------------------------

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    info: str  # the fence's language ("bash", "python", "" ...)
    start: int  # 1-based line of the first line inside the fence
    lines: tuple[str, ...]


def split_fences(text: str) -> tuple[list[Block], list[tuple[int, str]]]:
    """Fenced code blocks, and the other lines (1-based line number, text)."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    fence = ""
    info = ""
    start = 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if not fence and match:
            fence, info, start, body = match.group(1), match.group(2), number + 1, []
        elif fence and line.strip().startswith(fence):
            blocks.append(Block(info, start, tuple(body)))
            fence = ""
        elif fence:
            body.append(line)
        else:
            prose.append((number, line))
    return blocks, prose


def prose_text(text: str) -> str:
    """The page without its fenced blocks (their lines blanked, so that line numbers stay)."""
    lines = text.splitlines()
    keep = {number for number, _ in split_fences(text)[1]}
    return "\n".join(line if number in keep else "" for number, line in enumerate(lines, start=1))


INLINE_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def inline_code(text: str) -> Iterator[tuple[int, str]]:
    """(line, content) of every inline code span outside fenced blocks; a span may wrap onto the next line."""
    prose = prose_text(text)
    for match in INLINE_CODE.finditer(prose):
        line = prose.count("\n", 0, match.start()) + 1
        yield line, " ".join(match.group(1).split())


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading anchors by its text
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor on a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in split_fences(text)[1]:
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = counts.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            counts[base] = n + 1
    return found


# --- Links ---------------------------------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every Markdown link outside code."""
    prose = INLINE_CODE.sub(lambda m: " " * len(m.group(0)), prose_text(text))
    for match in LINK.finditer(prose):
        yield prose.count("\n", 0, match.start()) + 1, match.group(1)


def broken_links(page: Path, text: str, repo: Path = REPO) -> list[str]:
    """Relative links of a page whose file, or whose heading anchor, does not exist."""
    broken = []
    for line, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        where = page if not path_part else (page.parent / path_part).resolve()
        name = f"{page.relative_to(repo)}:{line}: {target}"
        if where != page and not where.exists():
            broken.append(f"{name}: no such file")
        elif fragment and where.suffix == ".md":
            heads = anchors(text if where == page else where.read_text(encoding="utf-8"))
            if fragment not in heads:
                broken.append(f"{name}: no heading with anchor #{fragment}")
        elif not str(where).startswith(str(repo)):
            broken.append(f"{name}: outside the repository")
    return broken


# --- Commands ------------------------------------------------------------------------------------------------------

SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
PROGRAMS = ("sagebox", ".venv/bin/sagebox", "make", "npx", "cdk", "python", "python3", ".venv/bin/python")
SEPARATORS = {"&&", "||", "|", ";"}


@dataclass(frozen=True)
class Command:
    """A command a page tells its reader to run: a whole command line of a shell block (`complete`), or a command
    named inline in the text, which may leave out what it does not discuss (required options, for one)."""

    page: str
    line: int
    argv: tuple[str, ...]
    complete: bool

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}: {shlex.join(self.argv)}"


def _words(line: str) -> list[list[str]]:
    """A shell line as the commands it runs: `$(...)` substitutions too; `VAR=x`, `time`, `eval` prefixes dropped."""
    inner = re.findall(r"\$\(([^()]*)\)", line)
    line = re.sub(r"\"?\$\([^()]*\)\"?", "SUBSTITUTION", line)
    found: list[list[str]] = []
    for part in [line, *inner]:
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue  # not shell (an answer, a JSON line)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in SEPARATORS:
                while command and (re.match(r"^[A-Z_][A-Z0-9_]*=", command[0]) or command[0] in ("time", "eval")):
                    command.pop(0)
                if command:
                    found.append(command)
                command = []
            else:
                command.append(word)
    return found


def _is_command(argv: list[str]) -> bool:
    if not argv or argv[0] not in PROGRAMS:
        return False
    if argv[0] == "npx":
        return argv[1:2] == ["cdk"]
    if argv[0].endswith("python") or argv[0] == "python3":
        return len(argv) > 1 and (argv[1] == "-m" or argv[1].startswith("scripts/"))
    return True


def commands(page: Path, text: str, repo: Path = REPO) -> list[Command]:
    """Every command a page tells its reader to run, from its shell blocks and its inline code."""
    name = str(page.relative_to(repo))
    found: list[Command] = []
    blocks, _ = split_fences(text)
    for block in blocks:
        if block.info not in SHELL_BLOCKS:
            continue
        logical = ""
        first = block.start
        for offset, raw in enumerate(block.lines):
            if not logical:
                first = block.start + offset
            logical += raw.rstrip()
            if logical.endswith("\\"):
                logical = logical[:-1] + " "
                continue
            found += [Command(name, first, tuple(argv), True) for argv in _words(logical) if _is_command(argv)]
            logical = ""
    for line, code in inline_code(text):
        code = code.replace("[", " ").replace("]", " ")  # `sagebox up [--containers]`: optional parts
        found += [Command(name, line, tuple(argv), False) for argv in _words(code) if _is_command(argv)]
    return found


PLACEHOLDER = re.compile(r"^(<[^>]+>|[A-Z][A-Z0-9_]*|\.\.\.)$")


def is_placeholder(word: str) -> bool:
    """A word the reader replaces: `MODEL`, `DIR`, `N`, `<hf-folder>`, `...`."""
    return bool(PLACEHOLDER.match(word))


# --- Measured figures ----------------------------------------------------------------------------------------------

_NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?(?:e-\d+)?"
_UNIT = r"ms|us|µs|s|min|MB|MiB|GB|GiB|KB|KiB|GFLOP|QPS|%|x"
FIGURE = re.compile(
    rf"(?<![\w.\-/:@$£+#])(?P<times>x)?(?P<number>{_NUMBER}(?:\s?[-–]\s?{_NUMBER})?)"
    rf"(?:\s?(?P<unit>{_UNIT})(?!\w))?(?![\w.\-:/]*\d)"
)


# A number right after a tool's name is its version ("Python 3.11", "rich 14.3"), not a figure.
VERSIONED = re.compile(r"\b(?:Python|Node|torch|rich|moto|cdk-nag|sentence-transformers|transformers|version)\s$")


def figures(text: str) -> list[str]:
    """The figures a text states, normalised ("340 s" -> "340s"): a number with a unit of time, size, rate or share
    (`ms`, `s`, `MB`, `QPS`, `%`), a factor (`x1.20`, `1.5x`), a decimal (`0.43`, `57.32`, `2.3e-3`) or a range
    (`48-51`). Bare integers (counts, bucket sizes), versions, dates and addresses are not figures."""
    found = []
    for match in FIGURE.finditer(text):
        if VERSIONED.search(text, max(0, match.start() - 40), match.start()):
            continue
        number = re.sub(r"\s", "", match.group("number")).replace("–", "-")
        unit = match.group("unit") or ""
        decimal = "." in number or "e-" in number
        ranged = re.search(r"\d-\d", number) is not None
        if match.group("times") or unit or decimal or ranged:
            found.append(f"{match.group('times') or ''}{number}{unit}")
    return found


def repeated_figures(pages: Mapping[str, str], allowed: Iterable[str] = ()) -> dict[str, list[str]]:
    """Figures stated on more than one page: {figure: [pages]}. A page may repeat its own figures."""
    where: dict[str, set[str]] = {}
    for name, text in pages.items():
        for figure in figures(text):
            where.setdefault(figure, set()).add(name)
    skip = set(allowed)
    return {figure: sorted(names) for figure, names in sorted(where.items()) if len(names) > 1 and figure not in skip}
