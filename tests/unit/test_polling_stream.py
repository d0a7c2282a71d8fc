"""Stream polls on the generic long-poll machinery: grouping, selectors, wake hints, one
window per waiter, and StreamPollingService's wake-up routing (no database)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence

import pytest

from queen_threads.polling import (
    GroupSelector,
    PollIntentionRegistry,
    PollWorker,
    PopResult,
    Response,
    ResponseQueues,
    shard_of,
)
from queen_threads.polling.clock import ManualClock
from queen_threads.settings import load_settings
from queen_threads.streams.intention import StreamGroupKey, StreamPollIntention, StreamPollRequest
from queen_threads.streams.polling import StreamPollingService
from tests.support.keys import qk
from tests.support.polling_fakes import make_intention

SOURCES = ("src-a", "src-b")
KEY = StreamGroupKey("stream", "s", "g")


def stream_intention(
    rid: str,
    stream: str = "s",
    group: str = "g",
    sources: tuple[str, ...] = SOURCES,
    *,
    created_at: float = 0.0,
    timeout_s: float = 30.0,
) -> StreamPollIntention:
    return StreamPollIntention(
        request_id=rid,
        worker_id=0,
        request=StreamPollRequest(stream, group, sources),
        deadline=created_at + timeout_s,
        created_at=created_at,
    )


class WindowPopper:
    """A stream window leaser over window counts per group: each pop leases one window
    or comes back empty with the group's ``hints`` entry as its ``wake_after``."""

    def __init__(self) -> None:
        self.windows: dict[StreamGroupKey, int] = {}
        self.hints: dict[StreamGroupKey, float] = {}
        self.calls: list[list[str]] = []
        self.released: list[str] = []
        self._leases = itertools.count(1)
        self._lock = threading.Lock()

    def pop_group(
        self, intentions: Sequence[StreamPollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        with self._lock:
            self.calls.append([it.request_id for it in intentions])
            results: list[PopResult] = []
            for intention in intentions:
                results.append(self._lease(intention))
                if not results[-1].has_messages:
                    break
            return results

    def pop_heads(
        self, intentions: Sequence[StreamPollIntention], partitions: Sequence[str | None] = ()
    ) -> list[PopResult]:
        with self._lock:
            self.calls.append([it.request_id for it in intentions])
            return [self._lease(intention) for intention in intentions]

    def release(self, lease_ids: Sequence[str]) -> None:
        with self._lock:
            self.released.extend(lease_ids)

    def _lease(self, intention: StreamPollIntention) -> PopResult:
        key = intention.grouping_key()
        if self.windows.get(key, 0) == 0:
            return PopResult(intention.request_id, 204, None, wake_after=self.hints.get(key))
        self.windows[key] -= 1
        lease = f"stream-lease-{next(self._leases)}"
        return PopResult(intention.request_id, 200, b'{"window": {}}', (lease,), 1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0.0)


@pytest.fixture
def registry(clock: ManualClock) -> PollIntentionRegistry[StreamPollIntention]:
    return PollIntentionRegistry[StreamPollIntention](worker_count=4, clock=clock)


# -- the generic registry with stream intentions -----------------------------------------


def test_stream_intentions_group_by_stream_and_consumer_group(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    shard = registry.register(stream_intention("a"))
    registry.register(stream_intention("b", group="h"))
    registry.register(stream_intention("c"))
    assert stream_intention("a").grouping_key() == KEY == ("stream", "s", "g")
    assert shard == shard_of(KEY, 4)
    assert KEY in registry.group_keys_for(shard)
    assert [it.request_id for it in registry.intentions_for(KEY)] == ["a", "c"]
    h = StreamGroupKey("stream", "s", "h")
    assert [it.request_id for it in registry.intentions_for(h)] == ["b"]


def test_names_containing_colons_do_not_collide(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    registry.register(stream_intention("x", stream="a:b", group="c"))
    registry.register(stream_intention("y", stream="a", group="b:c"))
    first = registry.intentions_for(StreamGroupKey("stream", "a:b", "c"))
    second = registry.intentions_for(StreamGroupKey("stream", "a", "b:c"))
    assert [it.request_id for it in first] == ["x"]
    assert [it.request_id for it in second] == ["y"]
    assert registry.stats().groups == 2


def test_a_stream_key_is_not_a_pop_key() -> None:
    pop_key = make_intention("r", queue="s", partition="g").grouping_key()
    assert stream_intention("r").grouping_key() != pop_key


def test_one_selector_per_source_queue() -> None:
    assert stream_intention("r").selectors() == (
        GroupSelector("src-a", None, None, None, "g"),
        GroupSelector("src-b", None, None, None, "g"),
    )
    pop = make_intention("p", queue="q", consumer_group="g")
    assert pop.selectors() == (pop.selector(),)


def test_every_source_is_indexed_and_forgotten_with_the_group(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    shard = registry.register(stream_intention("a"))
    for t in (0.0, 1.0):
        registry.record_round(KEY, False, t)
    assert registry.reset_matching("src-a") == {shard}
    registry.record_round(KEY, False, 2.0)
    assert registry.reset_matching("src-b") == {shard}
    assert registry.reset_matching("elsewhere") == set()
    assert registry.reset_matching("src-a", None, "other-group") == set()
    assert registry.reset_matching("src-a", None, "g") == {shard}  # a group-scoped wake-up
    registry.remove("a")
    assert registry.reset_matching("src-a") == set()
    assert registry.reset_matching("src-b") == set()
    assert registry._index._by_queue == {}


def test_waiters_of_one_group_with_other_sources_add_their_selectors(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    shard = registry.register(stream_intention("a", sources=("src-a",)))
    registry.register(stream_intention("b", sources=("src-a", "src-c")))
    assert registry.reset_matching("src-c") == {shard}
    registry.remove("a")
    registry.remove("b")
    assert registry._index._by_queue == {}


# -- wake hints --------------------------------------------------------------------------


def test_a_push_before_the_hint_does_not_reset_the_group_one_at_or_after_does(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    shard = registry.register(stream_intention("a"))
    registry.record_round(KEY, False, 0.0, wake_after=1_000.0)
    assert registry.wake_after(KEY) == 1_000.0
    assert registry.reset_matching("src-a", at=999.5) == set()
    assert not registry.is_due(KEY, 0.01)
    assert registry.wake_after(KEY) == 1_000.0
    assert registry.reset_matching("src-b", at=1_000.0) == {shard}
    assert registry.is_due(KEY, 0.01)
    assert registry.wake_after(KEY) is None, "a reset clears the hint"


def test_a_push_without_a_time_ignores_the_hint(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    shard = registry.register(stream_intention("a"))
    registry.record_round(KEY, False, 0.0, wake_after=1_000.0)
    assert registry.reset_matching("src-a") == {shard}
    assert registry.wake_after(KEY) is None


def test_reset_backoff_and_a_non_empty_round_clear_the_hint(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    registry.register(stream_intention("a"))
    registry.record_round(KEY, False, 0.0, wake_after=1_000.0)
    registry.reset_backoff(KEY)
    assert registry.wake_after(KEY) is None
    registry.record_round(KEY, False, 1.0, wake_after=1_000.0)
    registry.record_round(KEY, True, 2.0, wake_after=1_000.0)
    assert registry.wake_after(KEY) is None


def test_the_first_registration_of_a_group_drops_an_old_hint(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    registry.register(stream_intention("a"))
    registry.record_round(KEY, False, 0.0, wake_after=1_000.0)
    registry.remove("a")
    registry.register(stream_intention("b"))
    assert registry.wake_after(KEY) is None
    assert registry.is_due(KEY, 0.0)


def test_a_group_poked_in_flight_keeps_no_hint_from_that_round(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    registry.register(stream_intention("a"))
    assert registry.mark_in_flight(KEY)
    registry.reset_matching("src-a", at=500.0)  # a push lands while the check runs
    registry.record_round(KEY, False, 5.0, wake_after=1_000.0)  # the check predates it
    registry.unmark_in_flight(KEY)
    assert registry.is_due(KEY, 5.0)
    assert registry.wake_after(KEY) is None


def test_a_push_in_flight_before_the_stored_hint_leaves_the_round_alone(
    registry: PollIntentionRegistry[StreamPollIntention],
) -> None:
    registry.register(stream_intention("a"))
    registry.record_round(KEY, False, 0.0, wake_after=1_000.0)
    assert registry.mark_in_flight(KEY)
    assert registry.reset_matching("src-a", at=600.0) == set()
    registry.record_round(KEY, False, 5.0, wake_after=1_000.0)
    registry.unmark_in_flight(KEY)
    assert not registry.is_due(KEY, 5.01)
    assert registry.wake_after(KEY) == 1_000.0


def test_pop_groups_have_no_hint_and_are_reset_by_any_timed_push(clock: ManualClock) -> None:
    registry = PollIntentionRegistry(worker_count=1, clock=clock)
    registry.register(make_intention("p", queue="q"))
    key = qk("q:*:__QUEUE_MODE__")
    registry.record_round(key, False, 0.0)
    assert registry.wake_after(key) is None
    assert registry.reset_matching("q", at=0.0) == {0}
    assert registry.is_due(key, 0.01)


# -- through a real PollWorker -----------------------------------------------------------


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(0.0)
        self.registry = PollIntentionRegistry[StreamPollIntention](worker_count=1, clock=self.clock)
        self.popper = WindowPopper()
        self.responses = ResponseQueues()
        self.queue = self.responses.queue_for(0)
        self.worker = PollWorker(0, 1, self.registry, self.popper, self.responses, clock=self.clock)

    def wait(self, rid: str, **kwargs: object) -> None:
        self.queue.open(rid)
        self.registry.register(stream_intention(rid, **kwargs))  # type: ignore[arg-type]


def test_one_window_many_waiters_one_gets_it_the_others_keep_waiting() -> None:
    h = Harness()
    rids = [f"w{i}" for i in range(5)]
    for rid in rids:
        h.wait(rid, timeout_s=30.0)
    h.popper.windows[KEY] = 1
    h.worker.run_once(0.0)
    answered = {rid: h.queue.wait(rid, 0) for rid in rids}
    assert answered["w0"] == Response(200, b'{"window": {}}', ("stream-lease-1",))
    assert [rid for rid, r in answered.items() if r is not None] == ["w0"]
    assert [it.request_id for it in h.registry.intentions_for(KEY)] == rids[1:]
    assert h.popper.calls == [["w0"], ["w1", "w2", "w3", "w4"]]  # stopped at w1's empty one
    h.worker.run_once(29.999)
    assert h.registry.size() == 4, "nobody dropped before the deadline"
    h.worker.run_once(30.0)
    for rid in rids[1:]:
        assert h.queue.wait(rid, 0) == Response(204, None, ())
    assert h.registry.size() == 0 and h.popper.released == []


def test_the_worker_stores_the_hint_of_an_empty_group_round() -> None:
    h = Harness()
    h.wait("a")
    h.popper.hints[KEY] = 1_234.5
    h.worker.run_once(0.0)
    assert h.registry.wake_after(KEY) == 1_234.5
    h.popper.windows[KEY] = 1
    h.registry.reset_backoff(KEY)
    h.worker.run_once(0.01)
    assert h.queue.wait("a", 0) is not None


def test_the_worker_stores_the_hints_of_empty_head_rounds() -> None:
    h = Harness()
    other = StreamGroupKey("stream", "t", "g")
    h.wait("a")
    h.wait("b", stream="t")
    h.popper.hints[KEY] = 10.0
    h.popper.hints[other] = 20.0
    h.worker.run_once(0.0)
    assert h.popper.calls == [["a", "b"]]  # both heads in one call
    assert (h.registry.wake_after(KEY), h.registry.wake_after(other)) == (10.0, 20.0)


# -- StreamPollingService routing --------------------------------------------------------


class Service:
    """A StreamPollingService that is never started: its worker is driven by hand."""

    def __init__(self) -> None:
        settings = load_settings({}, dotenv_path=None)
        self.popper = WindowPopper()
        self.responses = ResponseQueues()
        self.service = StreamPollingService(settings, self.popper, self.responses, worker_id=3)
        self.worker = self.service.pool.workers[0]

    def wait_and_check_once(self, rid: str = "r1") -> None:
        request = StreamPollRequest("s", "g", SOURCES)
        intention = self.service.intention(request, 30_000, rid)
        assert intention.worker_id == 3 and intention.deadline > intention.created_at
        self.responses.queue_for(3).open(rid)
        self.service.registry.register(intention)
        self.worker.run_once()  # the first, empty, check: backed off for a second now

    def due(self) -> bool:
        return self.service.registry.is_due(KEY, time.monotonic())


def test_service_is_built_from_the_stream_settings() -> None:
    s = Service().service
    assert s.registry.worker_count == 1 and s.registry.capacity == 10_000
    assert (s.registry.policy.base_ms, s.registry.policy.max_ms) == (1000, 5000)
    assert s.registry.policy.threshold == 5
    assert s.worker_id == 3 and s.responses is not None


def test_a_push_to_a_source_queue_wakes_the_groups_worker() -> None:
    f = Service()
    f.wait_and_check_once()
    assert not f.due()
    f.service.on_event({"kind": "push", "queue": "elsewhere"})
    assert not f.due() and f.worker.counters.wakeups["notify"] == 0
    f.service.on_event({"kind": "push", "queue": "src-b"})
    assert f.due() and f.worker.counters.wakeups["notify"] == 1


def test_a_push_before_the_groups_hint_does_not_wake_it() -> None:
    f = Service()
    f.popper.hints[KEY] = time.time() + 3600
    f.wait_and_check_once()
    f.service.on_event({"kind": "push", "queue": "src-a"}, source="peer")
    assert not f.due() and f.worker.counters.wakeups["peer"] == 0
    assert f.service.on_push("src-a", time.time() + 7200) == {0}
    assert f.due() and f.worker.counters.wakeups["push"] == 1


def test_a_stream_event_resets_its_group() -> None:
    f = Service()
    f.popper.hints[KEY] = time.time() + 3600
    f.wait_and_check_once()
    f.service.on_event({"kind": "stream", "stream": "s", "consumerGroup": "other"})
    assert not f.due()
    f.service.on_event({"kind": "stream", "stream": "s", "consumerGroup": "g"})
    assert f.due() and f.worker.counters.wakeups["notify"] == 1
    assert f.service.registry.wake_after(KEY) is None
    assert f.service.on_group("missing", "g") is None


def test_other_and_malformed_events_are_ignored() -> None:
    f = Service()
    f.wait_and_check_once()
    for event in (
        {"kind": "free", "queue": "src-a", "consumerGroup": "g"},
        {"kind": "push"},
        {"kind": "push", "queue": 7},
        {"kind": "stream", "stream": "s"},
        {"queue": "src-a"},
    ):
        f.service.on_event(event)
    assert not f.due()
    assert sum(f.worker.counters.wakeups.values()) == 0


def test_a_window_found_by_the_service_worker_is_answered_through_the_shared_queues() -> None:
    f = Service()
    f.popper.windows[KEY] = 1
    f.wait_and_check_once()
    response = f.responses.queue_for(3).wait("r1", 0)
    assert response is not None and response.lease_ids == ("stream-lease-1",)
    assert f.service.stats()["totals"]["delivered"] == 1  # type: ignore[index]
