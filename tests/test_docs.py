"""The documentation fits its readers and stays true: README.md under 200 lines and each docs/ page under 400; every
relative link reaches a file and heading that exist; every path and variable the pages name exists in the code; and
a measured figure lives on exactly one page (the others link to it). Each check is also shown to catch a planted
mistake.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs_pages import (
    README,
    REPO,
    all_pages,
    anchors,
    broken_links,
    figures,
    inline_code,
    reader_pages,
    repeated_figures,
    slug,
)

# Numbers that look like figures but are settings, limits, budgets or published facts, which a page about each part
# may state beside the page that owns it; none of them is a measurement.
SETTINGS = {
    "0.99": "the embeddings' INT8 gate: mean cosine(INT8, FP32) >= 0.99",
    "0.001-1": "the range of the box's time scale (SAGEBOX_BOX_TIME_SCALE, sagebox up --time-scale)",
    "0.05": "the time scale of the README's and infra/README.md's examples",
    "0.01": "the time scale the endpoint-types test runs the box at",
    "30s": "SageMaker's SIGKILL, 30 s after SIGTERM",
    "50%": "a canary step's share, and the example shadow's sampling",
    "16%": "the share of the corpus' questions the demo recipe trains on (DemoRecipe)",
    "30%": "a share of the corpus a recipe trained on; also a generator setting",
    "36%": "the share of the corpus of a recipe measured once (its figures: tests/data/heldout/README.md)",
    "42%": "the share of the corpus of a recipe measured once",
    "15s": "the stacks' bake at time scale 0.05 (infra/README.md), a setting; measured times elsewhere equal it",
    "6s": "600 box seconds of serverless idling at time scale 0.01, and the termination wait at 0.05: settings",
    "1.5": "the box evaluates alarms 1.5 real seconds after a period ends (a setting); a shadow report's P50 in ms",
    "6-7": "questions per paragraph of two hand-written data sets (tests/data/heldout, tests/data/tuning2)",
}


def too_long(repo: Path = REPO) -> list[str]:
    """Pages at or over their limit: README.md 200 lines, each docs/ page 400."""
    limits = {repo / "README.md": 200, **{page: 400 for page in sorted((repo / "docs").glob("*.md"))}}
    counts = {page: len(page.read_text(encoding="utf-8").splitlines()) for page in limits}
    return [f"{page.relative_to(repo)}: {counts[page]} lines" for page, most in limits.items() if counts[page] >= most]


def test_readme_is_under_200_lines_and_each_docs_page_under_400() -> None:
    assert len(list((REPO / "docs").glob("*.md"))) >= 5
    assert too_long() == []


def test_a_page_over_its_limit_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("line\n" * 199)
    (tmp_path / "docs" / "short.md").write_text("line\n" * 399)
    assert too_long(tmp_path) == []
    (tmp_path / "README.md").write_text("line\n" * 200)
    (tmp_path / "docs" / "long.md").write_text("line\n" * 400)
    assert too_long(tmp_path) == ["README.md: 200 lines", "docs/long.md: 400 lines"]


def test_every_relative_link_reaches_a_file_and_heading_that_exist() -> None:
    broken = []
    for page in all_pages():
        broken += broken_links(page, page.read_text(encoding="utf-8"))
    assert broken == []


def test_readme_links_every_docs_page() -> None:
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"(docs/{p.name}" not in text]
    assert unlinked == []


def test_a_measured_figure_lives_on_one_page() -> None:
    pages = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in all_pages()}
    assert repeated_figures(pages, SETTINGS) == {}


def test_every_setting_allowed_to_repeat_is_still_repeated() -> None:
    """An entry of SETTINGS that no two pages share any more only hides the next copy of a measured figure."""
    pages = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in all_pages()}
    repeated = repeated_figures(pages)
    assert sorted(set(SETTINGS) - set(repeated)) == []


# --- paths and variables the pages name --------------------------------------------------------------------------

TOP = ("container/", "sagebox/", "infra/", "neuron_emu/", "tests/", "scripts/", "docs/", ".ci/")
FILES = ("Makefile", "pyproject.toml", "cdk.json", "package.json", ".dockerignore")


def missing_paths(text: str, repo: Path = REPO) -> list[str]:
    """Repository paths in inline code (`container/env.py`, `tests/data/retrieval`) that do not exist. Paths with
    a placeholder (`<out>`, `seq<L>`, `*`, `{fp32,int8}`) are checked up to it."""
    missing = []
    for line, code in inline_code(text):
        for word in code.split():
            word = word.strip("(),;:'\"").rstrip(".")
            if not (word.startswith(TOP) or word in FILES):
                continue
            path = re.split(r"[<*{]|\.\.\.", word)[0]
            if path != word:
                path = path.rsplit("/", 1)[0]
            if not (repo / path).exists():
                missing.append(f"{line}: {word}")
    return missing


def test_every_path_the_pages_name_exists() -> None:
    missing = []
    for page in reader_pages():
        missing += [f"{page.name}:{m}" for m in missing_paths(page.read_text(encoding="utf-8"))]
    assert missing == []


def code_text() -> str:
    parts = []
    for folder in ("container", "sagebox", "infra", "neuron_emu", "scripts"):
        parts += [p.read_text(encoding="utf-8") for p in sorted((REPO / folder).rglob("*.py"))]
    parts += [(REPO / name).read_text(encoding="utf-8") for name in ("Makefile", "container/Dockerfile")]
    return "\n".join(parts)


def unknown_variables(text: str, code: str) -> list[str]:
    """SAGEBOX_* and SAGEMAKER_* variables a page names that no code reads or writes."""
    named = set(re.findall(r"\b((?:SAGEBOX|SAGEMAKER)_[A-Z0-9_]+)\b", text))
    return sorted(name for name in named if not re.search(rf"\b{name}\b", code))


def test_every_variable_the_pages_name_is_in_the_code() -> None:
    code = code_text()
    unknown = []
    for page in reader_pages():
        unknown += [f"{page.name}: {name}" for name in unknown_variables(page.read_text(encoding="utf-8"), code)]
    assert unknown == []


# --- the checks catch a planted mistake --------------------------------------------------------------------------


def test_figures_are_numbers_with_units_factors_decimals_and_ranges_not_versions_or_dates() -> None:
    text = (
        "340 s cold, 110 s warm; `1442 passed in 1422s`; 0.29-0.30 on I; x1.20-1.30 and 1.5x; 89% refused, 16 %;"
        " 2.3e-3; F1 about 48-51; 109 vs 435 MB; 20.6-21.8 vs 19.6-20.0 QPS.\n"
        "Not figures: Python 3.11, torch 2.13.0, 2026-12-03, 127.0.0.1, ml.c6i.2xlarge, P50, 8x8, v1.1, 200 requests,"
        " 2,184 questions, seq<L>, $0.99/h, sha256."
    )
    assert figures(text) == [
        "340s",
        "110s",
        "1422s",
        "0.29-0.30",
        "x1.20-1.30",
        "1.5x",
        "89%",
        "16%",
        "2.3e-3",
        "48-51",
        "435MB",
        "20.6-21.8",
        "19.6-20.0QPS",
    ]


def test_a_figure_copied_to_another_page_is_caught() -> None:
    pages = {
        "README.md": "| `make demo` | 340 s cold, 110 s warm | [make demo](docs/benchmarks.md#make-demo) |",
        "docs/benchmarks.md": "| A, 2026-12-03 | 340 s: the packaged models 210 s | 110 s |",
        "docs/box.md": "SIGKILL after SageMaker's 30 s; the gate 0.99.",
        "docs/serving.md": "ahead of SageMaker's SIGKILL at 30 s; cosine >= 0.99",
    }
    assert repeated_figures(pages, SETTINGS) == {
        "110s": ["README.md", "docs/benchmarks.md"],
        "340s": ["README.md", "docs/benchmarks.md"],
    }
    # The real pages with one of the README's headline figures planted on the benchmarks page:
    real = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in all_pages()}
    table = real["README.md"].split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    headline = figures(table)
    assert len(headline) >= 5, "the README's headline table states no figures"
    for figure in headline:
        planted = {**real, "docs/benchmarks.md": real["docs/benchmarks.md"] + f"\nAlso measured: {figure}.\n"}
        assert repeated_figures(planted, SETTINGS) == {figure: ["README.md", "docs/benchmarks.md"]}


def test_anchors_are_github_s() -> None:
    assert slug("`make demo` and `make test`") == "make-demo-and-make-test"
    assert slug("The request path: server, gateway, boto3") == "the-request-path-server-gateway-boto3"
    assert slug("The demo QA model's accuracy") == "the-demo-qa-models-accuracy"
    assert slug("Tensor parallelism over NeuronCores (`neuron_emu.parallel`)") == (
        "tensor-parallelism-over-neuroncores-neuron_emuparallel"
    )
    assert anchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n") == {"a", "notes", "notes-1"}


def test_a_broken_link_or_anchor_is_caught() -> None:
    page = REPO / "docs" / "planted.md"
    text = (
        "[ok](box.md) [ok](../README.md#two-commands) [ok](#here) [web](https://example.com/x)\n"
        "[gone](nothing.md) [no anchor](box.md#no-such-heading) [self](#nowhere)\n"
        "`[not a link](in-code.md)`\n"
        "## Here\n"
    )
    assert broken_links(page, text) == [
        "docs/planted.md:2: nothing.md: no such file",
        "docs/planted.md:2: box.md#no-such-heading: no heading with anchor #no-such-heading",
        "docs/planted.md:2: #nowhere: no heading with anchor #nowhere",
    ]


def test_a_wrong_path_or_variable_is_caught() -> None:
    text = (
        "See `container/env.py`, `build/models` (made by a build), `<out>/{fp32,int8}/model.tar.gz`,"
        " `tests/data/retrieval/retrieval.jsonl`, `sagebox/box/control/` and `tp/seq<L>/`;\n"
        "not `container/envs.py` nor `sagebox/box/controls/`. `SAGEBOX_MAX_BATCH_SIZE` is read;"
        " `SAGEBOX_MAX_BATCH_SIZES` is not.\n"
    )
    assert missing_paths(text) == ["2: container/envs.py", "2: sagebox/box/controls/"]
    assert unknown_variables(text, code_text()) == ["SAGEBOX_MAX_BATCH_SIZES"]
