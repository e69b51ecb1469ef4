"""Engine: time order, deterministic ties (priority, then scheduling order), run(until), cancel."""

from __future__ import annotations

from functools import partial

from app.sim.engine import Engine


def test_events_run_in_time_then_priority_then_sequence_order() -> None:
    eng = Engine()
    seen: list[str] = []
    eng.schedule(5.0, lambda: seen.append("t5-p2-first"), priority=2)
    eng.schedule(5.0, lambda: seen.append("t5-p0"), priority=0)
    eng.schedule(1.0, lambda: seen.append("t1"), priority=9)
    eng.schedule(5.0, lambda: seen.append("t5-p2-second"), priority=2)
    eng.run()
    assert seen == ["t1", "t5-p0", "t5-p2-first", "t5-p2-second"]
    assert eng.now == 5.0


def test_run_until_stops_and_sets_clock() -> None:
    eng = Engine()
    seen: list[float] = []
    for t in (1.0, 2.0, 3.0):
        eng.schedule(t, partial(seen.append, t))
    eng.run(until=2.0)
    assert seen == [1.0, 2.0]
    eng.run(until=2.5)
    assert eng.now == 2.5 and seen == [1.0, 2.0]
    eng.run()
    assert seen == [1.0, 2.0, 3.0]


def test_cancelled_events_do_not_run_and_past_times_clamp_to_now() -> None:
    eng = Engine(start=10.0)
    seen: list[str] = []
    ev = eng.schedule(11.0, lambda: seen.append("cancelled"))
    eng.schedule(3.0, lambda: seen.append(f"late at {eng.now}"))
    ev.cancel()
    eng.run()
    assert seen == ["late at 10.0"]


def test_events_scheduled_from_events_keep_fifo_order_at_the_same_instant() -> None:
    eng = Engine()
    seen: list[int] = []

    def spawn() -> None:
        for k in range(3):
            eng.schedule(eng.now, partial(seen.append, k))

    eng.schedule(0.0, spawn)
    eng.run()
    assert seen == [0, 1, 2]
    assert eng.processed == 4
