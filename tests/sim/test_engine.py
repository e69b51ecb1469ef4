"""Engine: time order, deterministic ties (priority, then scheduling order), run(until), cancel,
and deferred same-instant events run where scheduled ones would."""

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


def _trace_of(defer: bool) -> tuple[list[str], int]:
    """A run where each event asks for a follow-up at its own instant, with other events due at
    the same instant before and after it in (time, priority, seq) order."""
    eng = Engine()
    seen: list[str] = []

    def follow(tag: str) -> None:
        seen.append(f"{tag} follow-up at {eng.now}")

    def event(tag: str, priority: int) -> None:
        seen.append(f"{tag} at {eng.now}")
        action = partial(follow, tag)
        if defer:
            eng.defer(action, priority)
        else:
            eng.schedule(eng.now, action, priority)

    eng.schedule(1.0, partial(event, "alone", 1), priority=0)  # nothing else due at 1.0
    eng.schedule(2.0, partial(event, "first", 1), priority=0)
    eng.schedule(2.0, partial(seen.append, "same instant, before the follow-up"), priority=0)
    eng.schedule(2.0, partial(seen.append, "same instant, after the follow-up"), priority=2)
    eng.schedule(3.0, partial(event, "tie", 1), priority=0)
    eng.schedule(3.0, partial(seen.append, "same priority, earlier sequence"), priority=1)
    eng.run()
    return seen, eng.processed


def test_a_deferred_event_runs_exactly_where_the_same_scheduled_event_would() -> None:
    deferred, scheduled = _trace_of(defer=True), _trace_of(defer=False)
    assert deferred == scheduled
    seen, processed = deferred
    before = seen.index("same instant, before the follow-up")
    assert seen.index("first follow-up at 2.0") == before + 1
    assert seen[-1] == "tie follow-up at 3.0"  # after the event of lower sequence at 3.0
    assert processed == 9  # run straight after its event, it still counts as one


def test_deferred_events_from_outside_a_step_and_cancelled_ones() -> None:
    eng = Engine(start=4.0)
    seen: list[str] = []
    eng.defer(partial(seen.append, "asked before the run"), 1)
    eng.schedule(5.0, lambda: eng.defer(partial(seen.append, "never"), 1).cancel())
    assert eng.peek() == 4.0  # waiting in the heap, not lost
    eng.run()
    assert seen == ["asked before the run"]
    assert eng.processed == 2 and eng.now == 5.0
