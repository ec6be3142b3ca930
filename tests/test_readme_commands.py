"""Every command README.md and docs/ tell a reader to run exists as written: `sagebox` subcommands and options parse
through the CLI's own argparse parser, `make` targets are in the Makefile, scripts exist and take the options given,
`python -m` modules exist, and `npx cdk` names real stacks, context keys, CLI commands and options.

A command of a shell block must parse whole (placeholders such as MODEL or N filled in); a command named inline in
the text may leave out what it does not discuss (required options), but every subcommand and option it names must
exist. The last tests plant a wrong command of each kind and show that the checks catch it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from tests.docs_pages import REPO, Command, commands, is_placeholder, reader_pages

# --- what the pages say ----------------------------------------------------------------------------------------------


@cache
def documented() -> tuple[Command, ...]:
    found: list[Command] = []
    for page in reader_pages():
        found += commands(page, page.read_text(encoding="utf-8"))
    return tuple(found)


def of_kind(kind: str) -> list[Command]:
    return [command for command in documented() if kind_of(command.argv) == kind]


def kind_of(argv: Iterable[str]) -> str:
    words = list(argv)
    if words[0].endswith("sagebox"):
        return "sagebox"
    if words[0] == "make":
        return "make"
    if words[0] in ("npx", "cdk"):
        return "cdk"
    if words[1] == "-m":
        return "module"
    return "script"


# --- sagebox ---------------------------------------------------------------------------------------------------------


def _parser(relaxed: bool) -> argparse.ArgumentParser:
    """The `sagebox` CLI's own parser; relaxed: nothing required (an inline mention may leave required options out)."""
    from sagebox.cli.app import build_parser

    parser = build_parser()
    for sub in _all_parsers(parser):
        sub.allow_abbrev = False  # a page spells every option out: `--container` only works as a prefix
    if relaxed:
        for sub in _all_parsers(parser):
            for action in sub._actions:
                if isinstance(action, argparse._SubParsersAction):
                    continue
                action.required = False
                if not action.option_strings and action.nargs is None:
                    action.nargs = "?"
    return parser


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _all_parsers(sub)
    return found


def sagebox_error(args: list[str], complete: bool) -> str | None:
    """Why `sagebox ARGS` would not parse, or None. Placeholders become a value of the right kind."""
    if not args:
        return None  # the program named alone
    if is_placeholder(args[0]):
        return None  # `sagebox <command> --help`
    filled = ["1" if is_placeholder(word) else word for word in args]
    parser = _parser(relaxed=not complete)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(filled)
    except SystemExit as exit:
        error = stderr.getvalue().strip().splitlines()[-1] if exit.code not in (0, None) else ""  # 0: --help
        if not complete and error.endswith(f"argument {args[-1]}: expected one argument"):
            return None  # `sagebox up --time-scale` names the option, not a value
        return error or None
    return None


def test_sagebox_commands_parse_with_the_cli_s_own_parser() -> None:
    found = of_kind("sagebox")
    assert len(found) > 20
    errors = [f"{c.where}: {error}" for c in found if (error := sagebox_error(list(c.argv[1:]), c.complete))]
    assert errors == []


# --- make ------------------------------------------------------------------------------------------------------------


def make_targets(makefile: Path = REPO / "Makefile") -> set[str]:
    targets: set[str] = set()
    for line in makefile.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.$()/ -]+?)\s*::?(?!=)", line)
        if match and not line.startswith("\t"):
            targets.update(word for word in match.group(1).split() if not word.startswith(("$", ".")))
    return targets


def make_error(args: list[str], targets: set[str]) -> str | None:
    wanted = [word for word in args if not word.startswith("-") and "=" not in word]
    missing = [word for word in wanted if word not in targets]
    return f"no make target {', '.join(missing)}" if missing else None


def test_make_targets_exist() -> None:
    targets = make_targets()
    assert {"demo", "test", "venv", "node"} <= targets
    found = of_kind("make")
    assert {c.argv[1:] for c in found} >= {("demo",), ("test",)}
    errors = [f"{c.where}: {error}" for c in found if (error := make_error(list(c.argv[1:]), targets))]
    assert errors == []


# --- scripts and modules ---------------------------------------------------------------------------------------------


@cache
def script_help(script: str) -> str:
    done = subprocess.run(
        [sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{script} --help: {done.stderr[-500:]}"
    return done.stdout


def script_error(args: list[str], repo: Path = REPO) -> str | None:
    script = args[0]
    if not (repo / script).is_file():
        return f"no such script {script}"
    options = [word.split("=", 1)[0] for word in args[1:] if word.startswith("--")]
    if not options:
        return None
    text = script_help(script) if repo == REPO else ""
    unknown = [option for option in options if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)]
    return f"{script} has no option {', '.join(unknown)}" if unknown else None


def test_scripts_exist_and_take_the_options_given() -> None:
    found = of_kind("script")
    assert any(c.argv[1] == "scripts/invoke-INT8.py" for c in found)
    with ThreadPoolExecutor(max_workers=4) as pool:  # each --help in its own process, side by side
        errors = list(pool.map(lambda c: (c, script_error(list(c.argv[1:]))), found))
    assert [f"{c.where}: {error}" for c, error in errors if error] == []


def module_error(module: str, repo: Path = REPO) -> str | None:
    """A `python -m` module of the project exists as a file (or a package with __main__), without importing it."""
    parts = module.split(".")
    if not (repo / parts[0]).is_dir():
        import importlib.util

        return None if importlib.util.find_spec(parts[0]) else f"no module {module}"
    path = repo.joinpath(*parts)
    if path.with_suffix(".py").is_file() or (path / "__main__.py").is_file():
        return None
    return f"no module {module}"


def test_python_modules_exist() -> None:
    found = of_kind("module")
    assert found
    errors = [f"{c.where}: {error}" for c in found if (error := module_error(c.argv[2]))]
    assert errors == []


# --- npx cdk ---------------------------------------------------------------------------------------------------------

CDK_VALUE_OPTIONS = {"-c", "--context", "--require-approval", "--app", "-a", "--profile", "--region", "--outputs-file"}


def known_stacks(repo: Path = REPO) -> set[str]:
    """`sagebox-artifacts` and `sagebox-<target>` of every targets file (default prefix)."""
    stacks = {"sagebox-artifacts"}
    for path in [repo / "infra/targets.json", *sorted((repo / "infra/examples").glob("*.json"))]:
        stacks |= {f"sagebox-{target['name']}" for target in json.loads(path.read_text())["targets"]}
    return stacks


def cdk_parts(argv: list[str]) -> tuple[str, list[str], list[str], list[str]]:
    """(command, stacks, options, context key=value) of `npx cdk ...` or `cdk ...`."""
    words = argv[2:] if argv[0] == "npx" else argv[1:]
    verb = ""
    stacks: list[str] = []
    options: list[str] = []
    context: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        if word.startswith("-"):
            option = word.split("=", 1)[0]
            options.append(option)
            if option in CDK_VALUE_OPTIONS and "=" not in word:
                position += 1
                if option in ("-c", "--context") and position < len(words):
                    context.append(words[position])
        elif not verb:
            verb = word
        else:
            stacks.append(word)
        position += 1
    return verb, stacks, options, context


def cdk_static_error(argv: list[str], stacks: set[str], repo: Path = REPO) -> str | None:
    """Stack names and context keys (what the project defines: infra/targets.json, infra/settings.py)."""
    from infra.settings import CONTEXT_KEYS

    verb, named, _, context = cdk_parts(argv)
    problems = []
    if verb in ("deploy", "destroy", "synth", "diff"):
        problems += [f"no stack {name}" for name in named if name not in stacks and not is_placeholder(name)]
    for pair in context:
        key, _, value = pair.partition("=")
        if key not in CONTEXT_KEYS:
            problems.append(f"no context key {key}")
        elif key == "targets":
            problems += [f"no targets file {path}" for path in value.split(",") if not (repo / path).is_file()]
    return "; ".join(problems) or None


def test_cdk_commands_name_real_stacks_and_context_keys() -> None:
    found = of_kind("cdk")
    assert any(cdk_parts(list(c.argv))[0] == "deploy" for c in found)
    stacks = known_stacks()
    errors = [f"{c.where}: {error}" for c in found if (error := cdk_static_error(list(c.argv), stacks))]
    assert errors == []


CDK = REPO / "node_modules/.bin/cdk"


@cache
def cdk_help(verb: str) -> str:
    done = subprocess.run(
        [str(CDK), *([verb] if verb else []), "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    return done.stdout + done.stderr


def cdk_cli_error(argv: list[str]) -> str | None:
    """The command and its options, against the pinned CDK CLI's own --help."""
    verb, _, options, _ = cdk_parts(argv)
    if not re.search(rf"^\s*cdk {re.escape(verb)}\b", cdk_help(""), re.MULTILINE):
        return f"the CDK CLI has no command {verb}"
    text = cdk_help(verb)
    unknown = [option for option in options if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)]
    return f"cdk {verb} has no option {', '.join(unknown)}" if unknown else None


@pytest.mark.skipif(not CDK.exists(), reason="the pinned CDK CLI is not installed (make node)")
def test_cdk_commands_and_options_exist_in_the_pinned_cli() -> None:
    found = of_kind("cdk")
    verbs = {cdk_parts(list(c.argv))[0] for c in found}
    with ThreadPoolExecutor(max_workers=4) as pool:  # fill the cache side by side: each --help starts node
        list(pool.map(cdk_help, ["", *verbs]))
    errors = [f"{c.where}: {error}" for c in found if (error := cdk_cli_error(list(c.argv)))]
    assert errors == []


# --- the checks catch a planted mistake ------------------------------------------------------------------------------


def planted(markdown: str) -> list[Command]:
    page = REPO / "docs" / "planted.md"
    return commands(page, markdown)


def test_a_wrong_sagebox_command_is_caught() -> None:
    found = planted(
        "```bash\n"
        ".venv/bin/sagebox up --containers --targets none\n"  # right
        ".venv/bin/sagebox up --no-such-option\n"  # an option the command does not have
        ".venv/bin/sagebox up --container\n"  # argparse would take the prefix of --containers; a page may not
        ".venv/bin/sagebox frobnicate --model x\n"  # no such subcommand
        ".venv/bin/sagebox package --model-dir DIR\n"  # --out is required in a whole command
        ".venv/bin/sagebox compile --model M --out o --tensor-parallel two\n"  # not an int
        "```\n"
        "Inline, `sagebox package --model-dir DIR` may leave --out out, but not `sagebox serve --frob`;"
        " `sagebox compile --backend cuda` names a backend there is not.\n"
    )
    errors = [sagebox_error(list(c.argv[1:]), c.complete) for c in found]
    assert errors[0] is None
    assert "unrecognized arguments: --no-such-option" in str(errors[1])
    assert "unrecognized arguments: --container" in str(errors[2])
    assert "invalid choice: 'frobnicate'" in str(errors[3])
    assert "required: --out" in str(errors[4])
    assert "invalid int value: 'two'" in str(errors[5])
    assert errors[6] is None
    assert "unrecognized arguments: --frob" in str(errors[7])
    assert "invalid choice: 'cuda'" in str(errors[8])


def test_a_missing_make_target_script_option_or_module_is_caught() -> None:
    found = planted(
        "```bash\nmake demo\nmake venv nodes\n"
        ".venv/bin/python scripts/invoke-INT8.py --endpoint x\n"
        ".venv/bin/python scripts/invoke-INT8.py --endpoints x\n"
        ".venv/bin/python scripts/no_such_script.py\n"
        "```\nRun `python -m sagebox.bench.runtime_checks DIR` or `python -m sagebox.bench.no_such`.\n"
    )
    targets = make_targets()
    assert [make_error(list(c.argv[1:]), targets) for c in found[:2]] == [None, "no make target nodes"]
    assert [script_error(list(c.argv[1:])) for c in found[2:5]] == [
        None,
        "scripts/invoke-INT8.py has no option --endpoints",
        "no such script scripts/no_such_script.py",
    ]
    assert [module_error(c.argv[2]) for c in found[5:]] == [None, "no module sagebox.bench.no_such"]


def test_a_wrong_cdk_stack_or_context_key_is_caught() -> None:
    found = planted(
        "```bash\nnpx cdk deploy sagebox-c6i-int8 --require-approval never\n"
        "npx cdk deploy sagebox-c6i-int9\n"
        "npx cdk synth -c targets=infra/examples/endpoint-types.json -c model_dirs=x\n"
        "```\n"
    )
    stacks = known_stacks()
    assert [cdk_static_error(list(c.argv), stacks) for c in found] == [
        None,
        "no stack sagebox-c6i-int9",
        "no context key model_dirs",
    ]
    if CDK.exists():
        assert cdk_cli_error(["npx", "cdk", "deploy", "--all", "--require-approval", "never"]) is None
        assert cdk_cli_error(["npx", "cdk", "deploy", "--al"]) == "cdk deploy has no option --al"
        assert cdk_cli_error(["npx", "cdk", "deplyo"]) == "the CDK CLI has no command deplyo"
