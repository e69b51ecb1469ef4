"""``yarn-sidecar policy run`` with a proportional scenario (its ``scenario`` module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.playground import load_scenario, run_scenario
from app.policies.base import PolicyError

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "scenarios" / "proportional.json"


def test_example_scenario_through_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "run", str(EXAMPLE), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "a              30    0.6250" in out and "c               0    0.1000" in out


def test_result_shares() -> None:
    result = run_scenario(load_scenario(EXAMPLE))
    assert result["shares"] == pytest.approx({"a": 0.625, "b": 0.275, "c": 0.1})


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        ({"policy": "proportional", "queues": {}}, "queues"),
        ({"policy": "proportional", "queues": {"a": {"pending": -1}}}, "queues.a.pending"),
        ({"policy": "proportional", "params": {"floor": 2}, "queues": {"a": {}}}, "params.floor"),
        ({"policy": "proportional", "params": {"tau": 1}, "queues": {"a": {}}}, "params.tau"),
    ],
)
def test_bad_scenarios_name_the_field(scenario: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        run_scenario(scenario)
    assert err.value.field == field
