"""neuron_emu is a product of its own: it imports nothing of the project, and runs where the project is absent."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.neuron_emu.conftest import run_python

PACKAGE = Path(__file__).resolve().parents[2] / "neuron_emu"
PROJECT_PACKAGES = frozenset({"infra", "container", "scripts", "sagebox"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_in(source: str, package: str) -> set[str]:
    """Every module `source` (a module of `package`) imports, wherever the import sits (functions,
    TYPE_CHECKING blocks, try blocks), plus literal names given to importlib.import_module / __import__."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def _imports(path: Path) -> set[str]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _modules() -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_import_scan_sees_lazy_relative_and_dynamic_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from container.manifest import CompileSpec\n"
        "def f():\n    try:\n        from infra.catalog import load_prices\n    except Exception:\n        pass\n"
        "    import importlib\n    importlib.import_module('scripts.x')\n"
        "from .rules import work\n"
    )
    found = _imports_in(source, "neuron_emu.cost")
    assert {"container.manifest", "infra.catalog", "scripts.x", "neuron_emu.cost.rules"} <= found


def test_neuron_emu_imports_nothing_of_the_project() -> None:
    modules = _modules()
    assert len(modules) > 20  # the scan found the package
    offenders = {
        module: sorted(name for name in names if name.split(".")[0] in PROJECT_PACKAGES)
        for module, names in modules.items()
    }
    assert {module: names for module, names in offenders.items() if names} == {}


def test_neuron_emu_modules_import_each_other_without_cycles() -> None:
    modules = _modules()
    graph = {
        module: {name for name in names if name in modules and name != module} for module, names in modules.items()
    }
    cycles: list[tuple[str, str]] = []
    for module, targets in graph.items():
        for target in targets:
            seen, stack = set(), [target]
            while stack:
                current = stack.pop()
                for nxt in graph.get(current, ()):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            if module in seen:
                cycles.append((module, target))
    assert cycles == []


@pytest.mark.slow
def test_neuron_emu_traces_plans_and_compiles_with_the_project_unimportable(tmp_path: Path) -> None:
    """A fresh interpreter in which importing infra/container/scripts/sagebox fails still traces, prices a plan
    it is given prices for, and compiles a QA artifact (lazy imports included)."""
    out = run_python(
        f"""
        import importlib.abc, json, sys

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {sorted(PROJECT_PACKAGES)!r}:
                    raise ImportError("neuron_emu must not import " + name)
                return None

        sys.meta_path.insert(0, Block())
        import torch, neuron_emu

        class QA(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(100, 8)
                self.out = torch.nn.Linear(8, 2)

            def forward(self, ids, mask, types):
                logits = self.out(self.emb(ids) * mask.unsqueeze(-1))
                return logits[..., 0], logits[..., 1]

        torch.manual_seed(0)
        prices = {{"inf2.xlarge": 1.0}}
        artifact = neuron_emu.compile_qa(QA().eval(), [8, 16], 1, None, {str(tmp_path)!r}, prices=prices)
        plan = artifact.plans[16]
        text = plan.to_text()
        print(json.dumps({{
            "info": artifact.compile_info().to_dict(),
            "priced": [i.instance_type for i in plan.instances if i.usd_per_hour is not None],
            "usd_column": "USD/h" in text,
            "project_modules": sorted(m for m in sys.modules if m.split(".")[0] in {sorted(PROJECT_PACKAGES)!r}),
        }}))
        """,
        cwd=tmp_path,
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["info"]["backend"] == "neuron_emu"
    assert result["info"]["target_instances"][0] == "ml.inf2.xlarge"
    assert result["priced"] == ["ml.inf2.xlarge"]
    assert result["usd_column"] is True
    assert result["project_modules"] == []
