"""Which partition a pop, an ack or a renewal concerns (queue/placement.py): learnt from
pop answers, for the one-partition entry points."""

from __future__ import annotations

import uuid

from queen_threads.queue.placement import (
    NodeAnchors,
    PartitionRoutes,
    ack_partition,
    merge_empty,
    partition_id,
)

P1, P2 = str(uuid.uuid4()), str(uuid.uuid4())


def _answer(lease: str, *pids: str) -> dict[str, object]:
    return {"leaseId": lease, "messages": [{"partitionId": p} for p in pids]}


def test_a_named_partition_and_its_lease_are_learnt_from_what_the_pop_delivered() -> None:
    routes = PartitionRoutes()
    request = {"queue": "q", "partition": "a"}
    assert routes.of_pop(request) is None
    routes.learn([request], [_answer("L1", P1, P1)])
    assert routes.of_pop(request) == P1
    assert routes.of_lease("L1") == P1
    assert routes.of_pop({"queue": "q", "partition": "b"}) is None


def test_a_pop_over_several_partitions_or_nothing_teaches_nothing() -> None:
    routes = PartitionRoutes()
    routes.learn([{"queue": "q", "partition": None}], [_answer("L2", P1, P2)])
    assert routes.of_lease("L2") is None
    routes.learn(
        [{"queue": "q", "partition": "a"}],
        [
            _answer(
                "",
            )
        ],
    )
    assert routes.of_pop({"queue": "q", "partition": "a"}) is None
    # a queue pop that happened to take one partition: its lease, not a partition name
    routes.learn([{"queue": "q", "partition": None}], [_answer("L3", P2)])
    assert routes.of_lease("L3") == P2
    assert routes.of_pop({"queue": "q", "partition": None}) is None


def test_the_oldest_entries_go_first() -> None:
    routes = PartitionRoutes(capacity=2)
    for lease in ("a", "b", "c"):
        routes.learn([{"queue": "q"}], [_answer(lease, P1)])
    assert [routes.of_lease(x) for x in ("a", "b", "c")] == [None, P1, P1]


def test_an_ack_concerns_one_partition_when_every_item_names_the_same_id() -> None:
    assert ack_partition([{"partitionId": P1}, {"partitionId": P1}]) == P1
    assert ack_partition([{"partitionId": P1}, {"partitionId": P2}]) is None
    assert ack_partition([{"partitionId": "not-a-uuid"}]) is None
    assert ack_partition([{}]) is None
    assert partition_id(None) is None


def test_the_pops_of_a_queue_turn_round_the_nodes() -> None:
    """NodeAnchors: every node once per pop, starting one node further each time for a key;
    read once until its time runs out; ids that are not partition ids left out."""
    loads: list[int] = []

    def load() -> list[str]:
        loads.append(1)
        return [P1, P2, "not-a-uuid"]

    nodes = NodeAnchors(load, ttl_s=60)
    first = nodes.order(("q", "g"))
    second = nodes.order(("q", "g"))
    assert sorted(first) == sorted([P1, P2]) and second == first[1:] + first[:1]
    assert nodes.order(("q", "g")) == first
    assert len(loads) == 1
    assert NodeAnchors(lambda: []).order(("q", "g")) == []


def test_the_nodes_empty_answers_keep_the_earliest_due_time() -> None:
    a = {"messages": [], "dueInMs": 500, "contended": False}
    b = {"messages": [], "dueInMs": None, "contended": True}
    assert merge_empty(None, a) == a
    assert merge_empty(a, b) == {"messages": [], "dueInMs": 500, "contended": True}
    assert merge_empty(b, {"messages": [], "dueInMs": 200}) == {
        "messages": [],
        "dueInMs": 200,
        "contended": True,
    }
    assert merge_empty({"messages": []}, {"messages": []}) == {"messages": []}
