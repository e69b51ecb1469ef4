"""The sample alert rules in docs/monitoring are valid and fire on what they watch (promtool)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs" / "monitoring"
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool missing (scripts/bootstrap installs Debian's prometheus)"
)


@pytest.mark.parametrize(
    "args", [["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]]
)
def test_promtool_accepts_the_rules(args: list[str]) -> None:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, *args], cwd=DOCS, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
