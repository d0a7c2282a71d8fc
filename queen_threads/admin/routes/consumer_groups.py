"""Consumer groups: summaries with lag, lagging partitions, delete, subscription, seek.

GET    /api/v1/consumer-groups
GET    /api/v1/consumer-groups/lagging?minLagSeconds=60
GET    /api/v1/consumer-groups/{group}
DELETE /api/v1/consumer-groups/{group}?deleteMetadata=true
DELETE /api/v1/consumer-groups/{group}/queues/{queue}?deleteMetadata=true
POST   /api/v1/consumer-groups/{group}/subscription                {subscriptionTimestamp}
POST   /api/v1/consumer-groups/{group}/queues/{queue}[/partitions/{partition}]/seek
                                                                   {toEnd: true} | {timestamp}
`__QUEUE_MODE__` (queue mode) is a valid group name on every route.
"""

from __future__ import annotations

import falcon

from queen_threads import validation as v
from queen_threads.admin import body
from queen_threads.admin.store import AdminStore
from queen_threads.http.params import iso_z, strict_bool
from queen_threads.http.request import int_param, json_object, media

DEFAULT_MIN_LAG_SECONDS = 60
MAX_MIN_LAG_SECONDS = 10 * 365 * 24 * 3600


def group_name(group: str) -> str:
    return v.name(group, "Consumer group")


class ConsumerGroups:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        media(resp, self.store.consumer_groups())


class Lagging:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        seconds = int_param(req, "minLagSeconds", DEFAULT_MIN_LAG_SECONDS, 0, MAX_MIN_LAG_SECONDS)
        media(resp, self.store.lagging(seconds))


class ConsumerGroup:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_get(self, req: falcon.Request, resp: falcon.Response, group: str) -> None:
        media(resp, self.store.consumer_group(group_name(group)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, group: str) -> None:
        name = group_name(group)
        delete_metadata = strict_bool(req, "deleteMetadata", True)
        cursors, _ = self.store.delete_consumer_group(name, delete_metadata)
        media(resp, {"success": True, "consumerGroup": name, "deletedPartitions": cursors,
                     "metadataDeleted": delete_metadata})  # fmt: skip


class GroupQueue:
    def __init__(self, store: AdminStore) -> None:
        self.store = store

    def on_delete(self, req: falcon.Request, resp: falcon.Response, group: str, queue: str) -> None:
        name, queue_name = group_name(group), v.name(queue, "Queue")
        delete_metadata = strict_bool(req, "deleteMetadata", True)
        cursors, _ = self.store.delete_consumer_group(name, delete_metadata, queue_name)
        media(resp, {"success": True, "consumerGroup": name, "queue": queue_name,
                     "deletedPartitions": cursors, "metadataDeleted": delete_metadata})  # fmt: skip


class Subscription:
    def __init__(self, store: AdminStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(self, req: falcon.Request, resp: falcon.Response, group: str) -> None:
        name = group_name(group)
        raw = json_object(req, self.body_limit, allow_empty=True, known=body.SUBSCRIPTION_FIELDS)
        moment = body.subscription_moment(raw)
        rows = self.store.update_subscription(name, moment)
        media(resp, {"success": True, "consumerGroup": name, "newTimestamp": iso_z(moment),
                     "rowsUpdated": rows})  # fmt: skip


class Seek:
    """Moves the group's cursor on every partition of the queue (or the one partition) and
    releases its leases there. An empty body is a 400 (nothing to seek to)."""

    def __init__(self, store: AdminStore, body_limit: int) -> None:
        self.store = store
        self.body_limit = body_limit

    def on_post(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        group: str,
        queue: str,
        partition: str | None = None,
    ) -> None:
        name, queue_name = group_name(group), v.name(queue, "Queue")
        part = v.name(partition, "Partition") if partition is not None else None
        raw = json_object(req, self.body_limit, allow_empty=True, known=body.SEEK_FIELDS)
        to_end, moment = body.seek_target(raw)
        updated = self.store.seek(name, queue_name, part, to_end, moment)
        reply = {"success": True, "consumerGroup": name, "queue": queue_name,
                 "partitionsUpdated": updated}  # fmt: skip
        if part is not None:
            reply["partition"] = part
        media(resp, reply)
