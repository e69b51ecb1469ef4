"""The layering written where a tool checks it (import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(__file__).parents[2] / ".venv/bin/lint-imports")
    done = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" in done.stdout and "0 broken" in done.stdout
