"""The interference guard steps from the ``maximum-capacity`` the RM holds: ticks that pushed
nothing (advise mode, drift, a refused push) advance its episode but never add up to more than
one ``step_pp`` in the first push that lands."""

from __future__ import annotations

from app.control.guard import GuardConfig, Reading, Slo, step

CFG = GuardConfig(slos=(Slo("web", 200.0, url="http://probe/"),), batch_queues=("root.b",))
CAP = {"root.a": 5000, "root.b": 5000}


def test_violated_ticks_that_pushed_nothing_still_lower_by_one_step() -> None:
    held = {"root.a": 10000, "root.b": 10000}  # the RM keeps its values: nothing was pushed
    state: dict[str, object] = {}
    for _ in range(4):
        s = step(state, [Reading("web", 900.0, 200.0)], CAP, held, CFG)
        state = s.state
        assert s.targets == {"root.b": 9000}  # 10 points below what the RM holds, every tick
    assert state["baseline"] == {"root.b": 10000}


def test_the_restore_raises_from_what_the_rm_holds() -> None:
    # the guard had asked for 60 and then 70, but only the 80 of an earlier push landed
    state = {"baseline": {"root.b": 10000}, "caps": {"root.b": 7000}, "calm": 2}
    s = step(state, [Reading("web", 100.0, 200.0)], CAP, {"root.a": 10000, "root.b": 8000}, CFG)
    assert s.targets == {"root.b": 9000}
