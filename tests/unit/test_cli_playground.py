"""``yarn-sidecar policy run``: every example runs; the worked examples print the papers' numbers;
bad files get errors naming the file and line or the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["policy", "run", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_every_example_runs_as_json_and_table(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, str(path))
    assert code == 0, err
    assert isinstance(json.loads(out), dict)
    code, table, err = _run(capsys, str(path), "--format", "table")
    assert code == 0 and table.strip(), err


def test_table_9_2_totals_through_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    expected = {  # Table 9.2 (docs/policies.md): totals of A and B
        "mlrf_table_9_2.json": ("alloc", 160, 240),
        "ltrf_table_9_2.json": ("alloc", 200, 200),
        "ltrf_table_9_2_discount.json": ("counted", 180, 180),
    }
    for name, (key, total_a, total_b) in expected.items():
        code, out, _ = _run(capsys, str(EXAMPLES / name))
        rounds = json.loads(out)["rounds"]
        assert code == 0
        assert sum(r[key]["A"] for r in rounds) == pytest.approx(total_a)
        assert sum(r[key]["B"] for r in rounds) == pytest.approx(total_b)


def test_table_9_3_rrf_row_through_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(EXAMPLES / "rrf_table_9_3.json"))
    rrf = json.loads(out)["rrf"]
    assert code == 0
    assert (rrf["VM1"]["vcores"], rrf["VM1"]["memory"]) == pytest.approx((5, 2.5))
    assert (rrf["VM2"]["vcores"], rrf["VM2"]["memory"]) == pytest.approx((7, 1))
    assert (rrf["VM3"]["vcores"], rrf["VM3"]["memory"]) == pytest.approx((8, 6.5))


def test_json_syntax_error_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "policy": "ltrf",\n  "capacity": 100,,\n}\n')
    code, _, err = _run(capsys, str(bad))
    assert code == 2
    assert f"{bad}:3:" in err and "invalid JSON" in err


def test_invalid_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = json.loads((EXAMPLES / "ltrf_table_9_2.json").read_text())
    scenario["rounds"][1]["new_demand"]["A"] = -5
    bad = tmp_path / "neg.json"
    bad.write_text(json.dumps(scenario))
    code, _, err = _run(capsys, str(bad))
    assert code == 2 and "rounds[1].new_demand.A" in err
    scenario = {"policy": "nope"}
    bad.write_text(json.dumps(scenario))
    code, _, err = _run(capsys, str(bad))
    assert code == 2 and "policy" in err and "nope" in err
