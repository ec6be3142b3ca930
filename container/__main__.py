"""Container entry point: `python -m container serve` (what `docker run IMAGE serve` executes)."""

from __future__ import annotations

import sys

USAGE = "usage: serve    (the only command; SageMaker runs the image as `docker run IMAGE serve`)"


def main(argv: list[str]) -> int:
    if argv[:1] != ["serve"] or len(argv) > 1:
        print(USAGE, file=sys.stderr)
        return 2
    from container.server import serve

    return serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
