"""PollIntention grouping keys and push matching."""

from __future__ import annotations

from functools import partial

import pytest

from queen_threads.polling import shard_of
from queen_threads.queue.intention import QUEUE_MODE, GroupKey, PopRequest
from queen_threads.queue.popper import request_for
from tests.support.polling_fakes import make_intention

_intention = partial(make_intention, "r")


def test_queue_mode_keys() -> None:
    assert _intention(queue="q").grouping_key() == GroupKey("queue", "q", None, QUEUE_MODE)
    key = _intention(queue="q", partition="p", consumer_group="g").grouping_key()
    assert key == GroupKey("queue", "q", "p", "g")


def test_namespace_mode_keys() -> None:
    key = _intention(namespace="ns", task="t", consumer_group="g").grouping_key()
    assert key == GroupKey("namespace", "ns", "t", "g")
    assert _intention(namespace="ns").grouping_key() == GroupKey(
        "namespace", "ns", None, QUEUE_MODE
    )
    assert _intention(task="t", consumer_group="g").grouping_key() == GroupKey(
        "namespace", None, "t", "g"
    )
    assert _intention(task="t").request.namespace_mode


def test_names_with_colons_never_share_a_key() -> None:
    a = _intention(queue="a:b", partition="c").grouping_key()
    b = _intention(queue="a", partition="b:c").grouping_key()
    assert a != b and shard_of(a, 1 << 30) != shard_of(b, 1 << 30)
    # an unset part is not the name "*"
    assert (
        _intention(queue="q").grouping_key() != _intention(queue="q", partition="*").grouping_key()
    )


def test_a_queue_never_shares_a_key_with_a_namespace_of_its_name() -> None:
    assert (
        _intention(queue="billing").grouping_key() != _intention(namespace="billing").grouping_key()
    )


def test_validation() -> None:
    with pytest.raises(ValueError):
        _intention(queue="q", batch=0)
    with pytest.raises(ValueError):
        _intention(queue="q", partitions=0)
    with pytest.raises(ValueError):
        _intention(partition="p")


def test_queue_selector_matching() -> None:
    wildcard = _intention(queue="q", consumer_group="g").selector()
    one = _intention(queue="q", partition="p", consumer_group="g").selector()
    assert wildcard.matches("q", "p", None, None, None)
    assert wildcard.matches("q", "other", "g", None, None)
    assert one.matches("q", "p", "g", None, None)
    assert one.matches("q", None, None, None, None)  # every partition of q
    assert not one.matches("q", "other", None, None, None)
    assert not one.matches("q", "p", "h", None, None)
    assert not one.matches("other", "p", None, None, None)


def test_namespace_selector_matching() -> None:
    both = _intention(namespace="ns", task="t").selector()
    ns_only = _intention(namespace="ns").selector()
    task_only = _intention(task="t").selector()
    assert both.matches("any-queue", "p", None, "ns", "t")
    assert not both.matches("any-queue", "p", None, "ns", "other")
    assert not both.matches("any-queue", "p", None, None, None)
    assert ns_only.matches("q", None, None, "ns", None)
    assert ns_only.matches("q", None, None, "ns", "t")
    assert not ns_only.matches("q", None, None, "other", "t")
    assert task_only.matches("q", None, None, None, "t")
    assert task_only.matches("q", None, QUEUE_MODE, "ns", "t")
    assert not task_only.matches("q", None, "g", "ns", "t")


def test_the_pop_request_reaches_the_stored_function_unchanged() -> None:
    request = PopRequest(
        queue="q", partition="p", consumer_group="g", batch=5, subscription_mode="new",
        auto_ack=True,
    )  # fmt: skip
    intention = make_intention("r", queue="q", partition="p", consumer_group="g", batch=5,
                               subscription_mode="new", auto_ack=True)  # fmt: skip
    assert intention.request == request
    args = request_for(intention, idx=3, stop_on_empty=True)
    assert args == {
        "idx": 3, "queue": "q", "partition": "p", "namespace": None, "task": None,
        "consumerGroup": "g", "batch": 5, "partitions": 1, "leaseId": args["leaseId"],
        "autoAck": False,  # a long poll is acknowledged after its answer was written
        "subscriptionMode": "new", "subscriptionFrom": None, "stopOnEmpty": True,
        "leaseSeconds": None, "autopilotBatch": False, "autopilotPartitions": False,
        "conflation": False,
        "due": True,  # an empty long-poll pop reports its due time
    }  # fmt: skip
    assert request.arguments("L")["autoAck"] is True and request.arguments("L")["leaseId"] == "L"
