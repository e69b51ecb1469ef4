"""Entries of the configuration keyed by no managed queue are named (``unmatched_queue_keys``),
with the full path when a leaf name was written for it."""

from __future__ import annotations

from app.control.config import unmatched_queue_keys
from tests.unit.control.test_config import cfg


def test_keys_naming_no_managed_queue_are_named_with_a_hint() -> None:
    config = cfg(
        bounds={"a": {"min": 45}, "root.b": {"max": 90}},
        weights={"root.gone": 2},
        floors={"*": 1, "root.a": 2, "x": 3},
    )
    assert unmatched_queue_keys(config, ["root.a", "root.b"]) == [
        "bounds.a names no queue under root: ignored (did you mean root.a?)",
        "floors.x names no queue under root: ignored",
        "weights.root.gone names no queue under root: ignored",
    ]
    assert unmatched_queue_keys(cfg(floors={"*": 1}), ["root.a"]) == []
