"""``yarn-sidecar simulate compare`` on the shared real traces, one CI-sized run per policy family:
the report is produced and the numbers obey what each family guarantees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests.sim.test_trace import TRACES, needs_traces

pytestmark = needs_traces
GOOGLE = TRACES / "google2011" / "jobs_with_tasks_first19h.csv.gz"
SWIM = TRACES / "swim"


def _compare(out: Path, *argv: str) -> dict[str, dict[str, float]]:
    code = main(["simulate", "compare", *argv, "--seed", "1", "--quiet", "--out", str(out)])
    assert code == 0
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in page and 'src="http' not in page
    results = json.loads((out / "compare.json").read_text(encoding="utf-8"))["results"]
    return {r["policy"]: r for r in results}


def test_deadline_allocators_on_google(tmp_path: Path) -> None:
    got = _compare(
        tmp_path,
        "--trace",
        str(GOOGLE),
        "--capacity",
        "25%",
        "--deadlines",
        "Fixed2x",
        "--limit-jobs",
        "400",
        "--policies",
        "baseline-fs,reactive-fs,oracle,pythia,justice",
    )
    assert list(got) == ["baseline-fs", "reactive-fs", "oracle", "pythia", "justice"]
    # Admission never starts a job it expects to miss: Oracle wastes nothing (thesis ch. 5).
    assert got["oracle"]["wtr"] == pytest.approx(0.0, abs=1e-9)
    for name, r in got.items():
        assert 0.0 <= r["sdr"] <= 1.0 and 0.0 <= r["ptr"] <= 1.0, name
        assert r["jobs"] == 400


def test_fawkes_weightings_on_the_two_swim_files(tmp_path: Path) -> None:
    got = _compare(
        tmp_path,
        "--trace",
        str(SWIM / "FB-2009_samples_24_times_1hr_0.tsv"),
        "--trace",
        str(SWIM / "FB-2009_samples_24_times_1hr_1.tsv"),
        "--capacity",
        "100",
        "--deadlines",
        "none",
        "--limit-jobs",
        "600",
        "--policies",
        "fawkes:TD,fawkes:EQ,fawkes:None",
    )
    assert set(got) == {"fawkes:TD", "fawkes:EQ", "fawkes:None"}
    assert all(r["jobs"] == 600 for r in got.values())


def test_long_term_fairness_on_google_users(tmp_path: Path) -> None:
    got = _compare(
        tmp_path,
        "--trace",
        str(GOOGLE),
        "--queue-by",
        "group:4",
        "--capacity",
        "25%",
        "--deadlines",
        "none",
        "--limit-jobs",
        "600",
        "--policies",
        "ltrf,mlrf,rrf",
    )
    assert set(got) == {"ltrf", "mlrf", "rrf"}
    assert all(0.0 < r["utilization"] <= 1.0 + 1e-9 for r in got.values())
