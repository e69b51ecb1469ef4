"""Job signatures (``app/policies/promise/signature.py``)."""

from __future__ import annotations

from app.policies.promise import signature


def test_recurring_names_share_a_signature() -> None:
    a = signature.keys_for(
        name="etl-2024-05-01-run42", app_type="MAPREDUCE", user="al", queue="etl"
    )
    b = signature.keys_for(
        name="etl-2024-05-02-run43", app_type="mapreduce", user="al", queue="etl"
    )
    c = signature.keys_for(name="report-7", app_type="MAPREDUCE", user="al", queue="etl")
    assert a == b and a.signature != c.signature and a.user_type == c.user_type
    assert a.chain() == (a.signature, "u:al|t:mapreduce", "q:etl", signature.GLOBAL)
    assert signature.normalise_name("job_1f2e3d4c5b6a") == "job_<id>"


def test_profile_tag_or_field_wins_over_the_name() -> None:
    k = signature.keys_for(
        name="x-1", app_type="spark", user="u", queue="q", tags=["profile:nightly"]
    )
    assert k.signature == "p:nightly"
    k2 = signature.keys_for(name="other", app_type="spark", user="v", queue="q", profile="nightly")
    assert k2.signature == "p:nightly"


def test_size_class() -> None:
    assert [signature.size_class(n) for n in (1, 2, 3, 4, 1000)] == [0, 1, 1, 2, 9]
