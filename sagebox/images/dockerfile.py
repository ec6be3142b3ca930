"""Split the serving Dockerfile into the builds `sagebox image build` runs, without changing what it builds.

The Dockerfile is one self-contained multi-stage file. Built whole, a code change makes podman 4.3 copy
the 1 GB venv again (`COPY --from`) just to find its cache entry. So the tool builds it in two parts:
the stages up to `runtime` (once per dependency set, tagged by their inputs), then the last stage alone
with its `FROM runtime` pointed at that image. The two parts hold every instruction of the file, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagebox.errors import SageboxError

_FROM = re.compile(r"^\s*FROM\s+(?P<args>.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class Stage:
    base: str
    name: str | None
    lines: tuple[str, ...]  # the FROM line first


@dataclass(frozen=True)
class Dockerfile:
    preamble: tuple[str, ...]  # global ARGs and comments before the first FROM
    stages: tuple[Stage, ...]

    def stage(self, name: str) -> int:
        for index, stage in enumerate(self.stages):
            if stage.name == name:
                return index
        raise SageboxError(f"the Dockerfile has no stage named {name!r}")


def _parse_from(args: str) -> tuple[str, str | None]:
    words = [w for w in args.split() if not w.startswith("--")]
    if len(words) == 1:
        return words[0], None
    if len(words) == 3 and words[1].lower() == "as":
        return words[0], words[2]
    raise SageboxError(f"cannot read the Dockerfile line FROM {args.strip()!r}")


def parse(text: str) -> Dockerfile:
    preamble: list[str] = []
    stages: list[tuple[str, str | None, list[str]]] = []
    continued = False
    for line in text.splitlines():
        match = None if continued else _FROM.match(line)
        if match:
            base, name = _parse_from(match.group("args"))
            stages.append((base, name, [line]))
        elif stages:
            stages[-1][2].append(line)
        else:
            preamble.append(line)
        stripped = line.rstrip()
        continued = stripped.endswith("\\") and not stripped.lstrip().startswith("#")
    if not stages:
        raise SageboxError("the Dockerfile has no FROM line")
    return Dockerfile(tuple(preamble), tuple(Stage(b, n, tuple(ls)) for b, n, ls in stages))


def _text(lines: list[str]) -> str:
    return "\n".join(lines).rstrip() + "\n"


def head(text: str, until: str) -> str:
    """The Dockerfile up to and including stage `until` (build it with target `until`)."""
    dockerfile = parse(text)
    last = dockerfile.stage(until)
    lines = list(dockerfile.preamble)
    for stage in dockerfile.stages[: last + 1]:
        lines += stage.lines
    return _text(lines)


def rebased_tail(text: str, parent: str, parent_image: str) -> str:
    """The last stage alone, its `FROM <parent>` pointed at the already built `parent_image`."""
    dockerfile = parse(text)
    tail = dockerfile.stages[-1]
    if tail.base != parent:
        raise SageboxError(f"the Dockerfile's last stage builds FROM {tail.base!r}, not the {parent!r} stage")
    if dockerfile.stage(parent) != len(dockerfile.stages) - 2:
        raise SageboxError(f"the {parent!r} stage must come right before the last stage")
    from_line = f"FROM {parent_image}" + (f" AS {tail.name}" if tail.name else "")
    return _text([*dockerfile.preamble, from_line, *tail.lines[1:]])
