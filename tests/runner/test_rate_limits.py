"""Rate limits: request and token pacing against the fake server, and the pacing arithmetic.

The server-side tests read the times at which the server received each request and assert
only lower bounds on the gaps (the limits are respected), never how fast the run was. The
unit tests drive :class:`Pacer` and :class:`Backoff` with a fake clock: ``asyncio.sleep`` is
replaced by one that records the wait and advances that clock.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultline.runner.limits import Backoff, Pacer
from faultline.targets import GenerationParams
from tests.runner.support import fast, journal_rows, run, tag, write_probes
from tests.targets.fakeapi import FakeAPI, Fault

_REAL_SLEEP = asyncio.sleep


class FakeClock:
    """A monotonic clock that moves only when told to, or when something sleeps on it."""

    def __init__(self, now: float = 1000.0, *, advance: bool = True) -> None:
        self.now = now
        self.advance = advance
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.advance:
            self.now += max(0.0, seconds)
        await _REAL_SLEEP(0)


@contextmanager
def sleeping_on(clock: FakeClock) -> Iterator[FakeClock]:
    """Make ``asyncio.sleep`` sleep on ``clock`` for the duration."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncio, "sleep", clock.sleep)
        yield clock


# -- against the server ------------------------------------------------------------------

# The server sees a request a moment after the pacer lets it go; a request held up on its way
# (a new connection, a garbage collection, a busy machine) arrives late and shortens the gap
# after it. Gaps are therefore checked over every span of requests, less this much, and
# against the time the run began, which no lateness can shorten.
LATENESS = 0.1


def assert_spaced(times: list[float], needs: list[float], *, began: float | None = None) -> None:
    """Request ``k`` arrived at ``times[k]`` and had to be followed by ``needs[k]`` seconds."""
    for i, j in itertools.combinations(range(len(times)), 2):
        need = sum(needs[i:j])
        assert times[j] - times[i] >= need - LATENESS, (i, j, times[j] - times[i], need)
    if began is not None:
        # The first request left no sooner than the run began, and each one after it waited.
        for k, t in enumerate(times):
            assert t >= began + sum(needs[:k]), (k, t - began)


def test_rpm_spaces_every_request_and_holds_in_every_window(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    probes = write_probes(tmp_path, 12)
    gc.collect()
    began = time.monotonic()  # the clock the server's log uses
    run(fake_api, probes, tmp_path / "out", runner=fast(concurrency=8, rpm=600))

    times = sorted(r.t for r in fake_api.log)
    assert len(times) == 12
    assert_spaced(times, [0.1] * 12, began=began)  # 600 a minute is one every 0.1 s
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    assert gaps[len(gaps) // 2] >= 0.09, gaps
    for start in times:
        assert sum(start <= t < start + 1.0 for t in times) <= 11


def test_rpm_paces_retries_too(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.plan(tag("p0"), [Fault.error(500), Fault.error(500)])
    probes = write_probes(tmp_path, 4)
    began = time.monotonic()
    run(fake_api, probes, tmp_path / "out", runner=fast(concurrency=4, rpm=600))

    times = sorted(r.t for r in fake_api.log)
    assert len(times) == 6
    assert_spaced(times, [0.1] * 6, began=began)


def test_tpm_spaces_requests_by_the_tokens_the_server_counted(
    fake_api: FakeAPI, tmp_path: Path
) -> None:
    tpm = 12_000  # 5 ms a token
    words = [5, 40, 5, 80, 5]
    out = tmp_path / "out"
    probes = write_probes(tmp_path, len(words), words=words)
    began = time.monotonic()
    run(fake_api, probes, out, runner=fast(concurrency=1, tpm=tpm))

    used = {
        r["probe_id"]: r["input_tokens"] + r["output_tokens"]
        for r in journal_rows(out)
        if r["input_tokens"] is not None
    }
    assert len(used) == len(words)
    log = sorted(fake_api.log, key=lambda r: r.t)
    order = [next(p for p in used if tag(p) in r.prompt) for r in log]
    # Each request holds the next one back for the tokens it really used.
    assert_spaced([r.t for r in log], [used[p] * 60 / tpm for p in order], began=began)
    # So a long prompt holds the next request back longer than a short one does.
    gap = {p: b.t - a.t for p, a, b in zip(order, log, log[1:], strict=False)}
    assert gap["p3"] > gap["p0"] + 0.1


def test_tpm_holds_with_concurrent_workers(fake_api: FakeAPI, tmp_path: Path) -> None:
    tpm = 12_000
    out = tmp_path / "out"
    probes = write_probes(tmp_path, 6)
    began = time.monotonic()
    run(
        fake_api,
        probes,
        out,
        runner=fast(concurrency=4, tpm=tpm),
        params=GenerationParams(max_tokens=20),  # a close estimate, so the run stays short
    )

    used = [r["input_tokens"] + r["output_tokens"] for r in journal_rows(out)]
    times = sorted(r.t for r in fake_api.log)
    # Every request books its tokens before it starts, so the last one to start waited for
    # all the others' tokens (whichever it was).
    need = (sum(used) - max(used)) * 60 / tpm
    assert times[-1] - times[0] >= need - LATENESS
    assert times[-1] - began >= need


# -- Pacer -------------------------------------------------------------------------------


def test_the_first_request_does_not_wait() -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(60, clock=clock)
        asyncio.run(pacer.acquire())
    assert [s for s in clock.slept if s > 0] == []


def test_back_to_back_requests_are_spaced_by_the_interval() -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(120, clock=clock)  # one every 0.5 s
        starts = []

        async def go() -> None:
            for _ in range(5):
                await pacer.acquire()
                starts.append(clock.now)

        asyncio.run(go())
    assert starts == pytest.approx([1000.0, 1000.5, 1001.0, 1001.5, 1002.0])


def test_concurrent_requests_book_successive_slots() -> None:
    with sleeping_on(FakeClock(advance=False)) as clock:
        pacer = Pacer(600, clock=clock)

        async def go() -> None:
            await asyncio.gather(*(pacer.acquire() for _ in range(5)))

        asyncio.run(go())
    assert sorted(clock.slept) == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_idle_time_is_not_banked_into_a_burst() -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(60, clock=clock)

        async def go() -> list[float]:
            await pacer.acquire()
            clock.now += 100  # a long quiet spell
            starts = []
            for _ in range(3):
                await pacer.acquire()
                starts.append(clock.now)
            return starts

        starts = asyncio.run(go())
    assert starts == pytest.approx([1100.0, 1101.0, 1102.0])


def test_units_book_proportionally_and_corrections_move_the_next_slot() -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(6000, clock=clock)  # 10 ms a token

        async def go() -> list[float]:
            starts = []
            await pacer.acquire(300)  # books 3 s
            starts.append(clock.now)
            pacer.correct(-200)  # it used 100: give back 2 s
            await pacer.acquire(50)
            starts.append(clock.now)
            pacer.correct(+50)  # it used 100: 0.5 s more
            await pacer.acquire(1)
            starts.append(clock.now)
            return starts

        starts = asyncio.run(go())
    assert starts == pytest.approx([1000.0, 1001.0, 1002.0])


def test_a_correction_never_books_into_the_past() -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(60, clock=clock)

        async def go() -> float:
            await pacer.acquire(1)
            clock.now += 0.2
            pacer.correct(-1000)  # far more than was booked
            await pacer.acquire(1)
            first_free = clock.now
            await pacer.acquire(1)
            return clock.now - first_free

        spacing = asyncio.run(go())
    assert spacing == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [0, -1, 0.0])
def test_a_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="above 0"):
        Pacer(rate)


@given(
    per_minute=st.floats(min_value=1, max_value=100_000),
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=10),  # idle time before the request
            st.floats(min_value=0.1, max_value=500),  # units it books
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_sequential_requests_wait_exactly_as_long_as_the_rate_needs(
    per_minute: float, steps: list[tuple[float, float]]
) -> None:
    with sleeping_on(FakeClock()) as clock:
        pacer = Pacer(per_minute, clock=clock)
        interval = 60 / per_minute

        async def go() -> list[tuple[float, float, float]]:
            out = []
            for idle, units in steps:
                clock.now += idle
                arrived = clock.now
                await pacer.acquire(units)
                out.append((arrived, clock.now, units))
            return out

        timeline = asyncio.run(go())
    free = timeline[0][0]
    for arrived, started, units in timeline:
        assert started >= arrived
        expected = max(arrived, free)  # no sooner than the rate allows, no later either
        assert started == pytest.approx(expected, rel=1e-9, abs=1e-6)
        free = started + units * interval


@given(
    per_minute=st.integers(min_value=1, max_value=600),
    bursts=st.lists(
        st.tuples(st.floats(min_value=0, max_value=5), st.integers(min_value=1, max_value=20)),
        min_size=1,
        max_size=10,
    ),
)
def test_no_minute_holds_more_than_the_limit(
    per_minute: int, bursts: list[tuple[float, int]]
) -> None:
    starts: list[float] = []
    with sleeping_on(FakeClock(advance=False)) as clock:
        pacer = Pacer(per_minute, clock=clock)

        async def one(at: float) -> None:
            before = len(clock.slept)
            await pacer.acquire()
            starts.append(at + (clock.slept[before] if len(clock.slept) > before else 0.0))

        async def go() -> None:
            for idle, n in bursts:
                clock.now += idle
                await asyncio.gather(*(one(clock.now) for _ in range(n)))

        asyncio.run(go())
    starts.sort()
    for i, start in enumerate(starts):
        in_window = sum(start <= t < start + 60 - 1e-6 for t in starts[i:])
        assert in_window <= per_minute


# -- Backoff -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "step"), [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.6), (5, 2.0), (30, 2.0)]
)
def test_backoff_doubles_from_the_base_up_to_the_cap(attempt: int, step: float) -> None:
    backoff = Backoff(0.2, 2.0, seed=1)
    delays = [backoff.delay(attempt) for _ in range(200)]
    assert all(0.5 * step <= d <= step for d in delays)
    assert max(delays) - min(delays) > 0.2 * step  # jittered, not constant


@given(
    base=st.floats(min_value=1e-3, max_value=100),
    cap=st.floats(min_value=1e-3, max_value=1000),
    attempt=st.integers(min_value=1, max_value=80),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_backoff_delay_is_within_half_to_all_of_the_capped_step(
    base: float, cap: float, attempt: int, seed: int
) -> None:
    step = min(cap, base * 2.0 ** (attempt - 1))
    delay = Backoff(base, cap, seed=seed).delay(attempt)
    assert 0.5 * step <= delay <= step


@given(
    retry_after=st.floats(min_value=0, max_value=3600),
    attempt=st.integers(min_value=1, max_value=20),
    cap=st.floats(min_value=1e-3, max_value=10),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_backoff_honours_retry_after_with_at_most_ten_percent_more(
    retry_after: float, attempt: int, cap: float, seed: int
) -> None:
    delay = Backoff(0.01, cap, seed=seed).delay(attempt, retry_after)
    assert retry_after <= delay <= 1.1 * retry_after + 1e-12


def test_backoff_is_reproducible_from_its_seed() -> None:
    a, b = Backoff(1.0, 60.0, seed=7), Backoff(1.0, 60.0, seed=7)
    assert [a.delay(n) for n in range(1, 10)] == [b.delay(n) for n in range(1, 10)]


def test_a_retry_after_pauses_every_request_for_that_long() -> None:
    with sleeping_on(FakeClock()) as clock:
        backoff = Backoff(0.01, 1.0, clock=clock)
        backoff.delay(1, retry_after=5.0)
        clock.now += 1.0  # the pause started when the server answered

        asyncio.run(backoff.wait_if_paused())
    assert clock.now == pytest.approx(1005.0)
    assert sum(clock.slept) == pytest.approx(4.0)


def test_a_shorter_retry_after_does_not_shorten_a_pause() -> None:
    with sleeping_on(FakeClock()) as clock:
        backoff = Backoff(0.01, 1.0, clock=clock)
        backoff.delay(1, retry_after=5.0)
        backoff.delay(1, retry_after=1.0)

        asyncio.run(backoff.wait_if_paused())
    assert clock.now == pytest.approx(1005.0)


def test_plain_backoff_pauses_nobody_else() -> None:
    with sleeping_on(FakeClock()) as clock:
        backoff = Backoff(10.0, 60.0, clock=clock)
        assert backoff.delay(3) > 0

        asyncio.run(backoff.wait_if_paused())
    assert clock.slept == []


@given(retry_after=st.floats(min_value=0, max_value=1e6), now=st.floats(min_value=0, max_value=1e6))
def test_a_pause_ends_exactly_retry_after_from_when_it_was_asked(
    retry_after: float, now: float
) -> None:
    with sleeping_on(FakeClock(now)) as clock:
        backoff = Backoff(clock=clock)
        backoff.delay(1, retry_after)
        asyncio.run(backoff.wait_if_paused())
    assert clock.now == pytest.approx(now + retry_after, rel=1e-9, abs=1e-6)
    assert math.isclose(sum(clock.slept), retry_after, rel_tol=1e-9, abs_tol=1e-6)
