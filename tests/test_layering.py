"""Dependencies point one way (tests/layering.py): checked on the code as it is, and shown to catch a breach."""

from __future__ import annotations

from pathlib import Path

from tests.layering import (
    ALLOWED,
    PIPELINE_STAGES,
    all_imports,
    cycles,
    forbidden,
    imports_of,
    module_name,
    pipeline_breaches,
    project_files,
)

REPO = Path(__file__).resolve().parents[1]


def test_no_package_imports_what_it_must_not() -> None:
    assert forbidden(all_imports(REPO, project_files(REPO))) == []


def test_no_cycles_among_module_level_imports() -> None:
    files = list(project_files(REPO))
    modules = {module_name(REPO, path) for path in files}
    assert cycles(all_imports(REPO, files), modules) == []


def test_no_cycles_even_through_imports_deferred_inside_functions() -> None:
    files = list(project_files(REPO))
    modules = {module_name(REPO, path) for path in files}
    assert cycles(all_imports(REPO, files), modules, deferred=True) == []


def test_a_circle_closed_inside_a_function_is_caught() -> None:
    fleet = list(imports_of("from pkg.server import free_port\n", "pkg.box.fleet"))
    server = list(
        imports_of("def f():\n    from pkg.box.fleet import load_failure\n    return load_failure\n", "pkg.server")
    )
    modules = {"pkg.box.fleet", "pkg.server"}
    assert cycles([*fleet, *server], modules) == []  # module level only: the deferred import hides it
    assert cycles([*fleet, *server], modules, deferred=True) == [["pkg.box.fleet", "pkg.server", "pkg.box.fleet"]]
    guarded = imports_of(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.box.fleet\n", "pkg.server"
    )
    assert cycles([*fleet, *guarded], modules, deferred=True) == []


def test_a_forbidden_import_is_caught_even_deferred_inside_a_function() -> None:
    source = "import json\n\ndef f():\n    from sagebox.errors import SageboxError\n    return SageboxError\n"
    found = forbidden(imports_of(source, "neuron_emu.qa"))
    assert found == ["neuron_emu.qa:4 imports sagebox.errors", "neuron_emu.qa:4 imports sagebox.errors.SageboxError"]
    assert forbidden(imports_of("from infra.catalog import instances\n", "container.app")) == [
        "container.app:1 imports infra.catalog",
        "container.app:1 imports infra.catalog.instances",
    ]
    assert forbidden(imports_of("import scripts.bench_models\n", "tests.sagebox.x")) == [
        "tests.sagebox.x:1 imports scripts.bench_models"
    ]
    assert forbidden(imports_of("from tests.conftest import REPO\n", "sagebox.box.up")) != []
    # Relative imports resolve against the importing module.
    assert forbidden(imports_of("from ..sagebox import errors\n", "neuron_emu.cost.plan")) == []  # neuron_emu.sagebox
    assert forbidden(imports_of("from . import env\n", "container.app")) == []


def test_a_cycle_is_caught_and_type_checking_imports_are_not_edges() -> None:
    a = imports_of("from pkg import b\n", "pkg.a")
    b = imports_of("import pkg.a\n", "pkg.b")
    assert cycles([*a, *b], {"pkg.a", "pkg.b"}) == [["pkg.a", "pkg.b", "pkg.a"]]
    guarded = imports_of("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n", "pkg.b")
    assert cycles([*a, *guarded], {"pkg.a", "pkg.b"}) == []


def test_the_rules_say_what_the_guide_says() -> None:
    assert ALLOWED["neuron_emu"] == frozenset()
    assert ALLOWED["container"] == {"neuron_emu"}
    assert "sagebox" not in ALLOWED["infra"]
    assert all("scripts" not in allowed for allowed in ALLOWED.values())
    assert all("tests" not in allowed for package, allowed in ALLOWED.items() if package != "tests")


def test_the_pipeline_stages_depend_one_way_and_never_on_the_demo() -> None:
    assert pipeline_breaches(all_imports(REPO, project_files(REPO))) == []


def test_every_folder_of_the_pipeline_is_a_stage_in_build_order() -> None:
    folders = {p.name for p in (REPO / "sagebox" / "pipeline").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(PIPELINE_STAGES)
    opening = (REPO / "sagebox" / "pipeline" / "__init__.py").read_text()
    listed = [line.split("/")[0].strip() for line in opening.splitlines() if line.startswith("    ") and "/ " in line]
    assert listed == list(PIPELINE_STAGES)  # the house's opening comment lists them in the same order


def test_a_stage_reaching_forward_or_into_the_demo_is_caught() -> None:
    forward = imports_of("from sagebox.pipeline.gate.task_gate import GateLimits\n", "sagebox.pipeline.quantize.int8")
    assert [breach.split(" imports ")[1] for breach in pipeline_breaches(forward)] == [
        "sagebox.pipeline.gate.task_gate (gate runs after quantize)",
        "sagebox.pipeline.gate.task_gate.GateLimits (gate runs after quantize)",
    ]
    deferred_demo = "def f():\n    from sagebox.demo import qa_corpus\n    return qa_corpus\n"
    why = "(the pipeline imports no other part of sagebox)"
    assert pipeline_breaches(imports_of(deferred_demo, "sagebox.pipeline.gate.task_eval")) == [
        f"sagebox.pipeline.gate.task_eval:2 imports sagebox.demo {why}",
        f"sagebox.pipeline.gate.task_eval:2 imports sagebox.demo.qa_corpus {why}",
    ]
    upward = imports_of("from sagebox.pipeline.quantize_flow import run\n", "sagebox.pipeline.gate.evaluate")
    assert pipeline_breaches(upward)[0].endswith("(a stage never imports the orchestration)")
    # Backward, within a stage, shared modules and the orchestration using any stage are all fine.
    fine = "from sagebox.pipeline.load.hf_task import TaskInfo\nfrom sagebox.errors import SageboxError\n"
    assert pipeline_breaches(imports_of(fine, "sagebox.pipeline.package.tarball")) == []
    assert (
        pipeline_breaches(imports_of("from sagebox.pipeline.gate import task_eval\n", "sagebox.pipeline.build_all"))
        == []
    )
    # The demo may use the pipeline; only the other way round is a breach.
    assert (
        pipeline_breaches(imports_of("from sagebox.pipeline.export.artifact import x\n", "sagebox.demo.models")) == []
    )
