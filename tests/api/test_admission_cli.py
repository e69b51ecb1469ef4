"""``yarn-sidecar admission show|set`` against the real app served in-process."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.test_operator_cli import _cli, served

__all__ = ["served"]


def test_show_and_set(served: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "admission", "show")
    assert code == 0, err
    assert out.startswith("justice (settings): alpha=0.5")
    assert "registered: justice, promise, pythia" in out
    code, out, err = _cli(capsys, "admission", "set", "pythia", "--params", '{"alpha": 0.25}')
    assert code == 0, err
    assert out.startswith("pythia (operator): alpha=0.25")
    assert served.get("/admission").json()["policy"] == "pythia"


def test_bad_input_names_the_field(served: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "admission", "set", "promise", "--params", '{"quantile": 2}')
    assert code == 2 and "params.quantile" in err
    code, _, err = _cli(capsys, "admission", "set", "promise", "--params", "{nope")
    assert code == 2 and "--params: invalid JSON" in err
    assert served.get("/admission").json()["policy"] == "justice"
