"""cfn-lint (AWS's CloudFormation linter) on every template the app synthesizes: no errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.infra.conftest import Synthesized


def test_every_synthesized_template_passes_cfn_lint(synthesized: Synthesized, tmp_path: Path) -> None:
    paths = []
    for name, template in synthesized.templates.items():
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(template))
        paths.append(str(path))
    assert len(paths) == 6
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", "--", *paths],
        capture_output=True,
        text=True,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], [f"{f['Rule']['Id']} {f['Filename']}: {f['Message']}" for f in errors]
    assert result.returncode in (0, 4, 8), result.stderr  # 4: warnings, 8: informational; errors would be 2
