"""The real AWS CDK CLI (pinned in package.json, installed by `make node`), run as a user runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sagebox.errors import SageboxError
from sagebox.paths import REPO

Runner = Callable[..., subprocess.CompletedProcess[str]]
# Lines the CLI prints that say nothing about the deploy (Node's support notices).
NOISE = ("NodeVersionSupportWarning", "versions published after", "require node >=", "To continue receiving",
         "and security updates", "More information can be found", "node --trace-warnings", "Warning: ")  # fmt: skip


def cdk_command(repo: Path = REPO) -> list[str]:
    local = repo / "node_modules" / ".bin" / "cdk"
    if local.is_file():
        return [str(local)]
    if shutil.which("npx"):
        return ["npx", "--no-install", "cdk"]
    raise SageboxError("the AWS CDK CLI is not installed: run `make node` (npm ci)")


def last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip() and not any(n in line for n in NOISE)]
    marked = [line for line in lines if line.startswith(("❌", "‣", "Error", "sagebox infra: error"))]
    return (marked or lines or ["no output"])[-1]


def run_cdk(
    args: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    *,
    repo: Path = REPO,
    run: Runner = subprocess.run,
) -> str:
    """`cdk <args>` in the repository with `env` added to this process's environment; its output (also appended
    to `log_path`). A failure is one line: the CLI's own error."""
    argv = [*cdk_command(repo), *args]
    full_env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env}
    result = run(argv, cwd=repo, env=full_env, capture_output=True, text=True, check=False)
    output = (result.stdout or "") + (result.stderr or "")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a") as log:
        log.write(f"$ cdk {' '.join(args)}\n{output}\n")
    if result.returncode != 0:
        raise SageboxError(f"cdk {args[0]} failed: {last_error(output)} (full output: {log_path})")
    return output
