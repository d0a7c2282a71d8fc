"""Ephemeral queues as the routes see them: the store, plus waiting pops and their gates."""

from __future__ import annotations

import time
from typing import Any

from queen_threads.ephemeral.body import PopQuery
from queen_threads.ephemeral.gates import Gates
from queen_threads.ephemeral.store import EphemeralStore
from queen_threads.errors import EphemeralQueueNotFound, TooManyRequests, ValidationError

FULL_RETRY_AFTER_S = 1


class EphemeralQueues:
    """One per worker process."""

    def __init__(self, store: EphemeralStore, gates: Gates | None = None) -> None:
        self.store = store
        self.gates = gates or Gates(store.watch)

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.store.configure(body)

    def reset(self, queue: str) -> dict[str, Any]:
        return self.store.reset(queue)

    def delete(self, queue: str) -> dict[str, Any]:
        return self.store.delete(queue)

    def push(self, body: dict[str, Any]) -> dict[str, Any]:
        """All or nothing; a full queue with policy reject answers 429."""
        answer = self.store.push(body)
        error = answer.get("error")
        if error == "full":
            raise TooManyRequests(
                f"Ephemeral queue {body['queue']} is full ({answer['length']} of "
                f"{answer['maxLength']} messages, {answer['bytes']} of {answer['maxBytes']} "
                "bytes) and its policy is reject",
                FULL_RETRY_AFTER_S,
                code="ephemeral_queue_full",
            )
        if error == "too_large":
            raise ValidationError(
                f"This push ({answer['count']} messages, {answer['bytes']} bytes) is larger "
                f"than ephemeral queue {body['queue']} may hold ({answer['maxLength']} "
                f"messages, {answer['maxBytes']} bytes)"
            )
        self.gates.open(body["queue"])
        return answer

    def pop(self, query: PopQuery) -> dict[str, Any]:
        """Up to `batch` messages; with `wait_ms`, waits for them on the queue's gate (and
        for windowBuffer to fill) until the deadline."""
        deadline = time.monotonic() + query.wait_ms / 1000
        while True:
            gate = self.gates.gate(query.queue)
            left = deadline - time.monotonic()
            answer = self.store.pop(query.store_args(window=left > 0))
            if answer["messages"] or left <= 0:
                return _reply(answer)
            held = answer.get("windowWaitMs")
            pause = min(left, held / 1000) if held is not None else left
            self.gates.wait(query.queue, gate, int(answer["version"]), pause)

    def ack(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.store.ack(body)
        if any(r["outcome"] == "redelivered" for r in answer["results"]):
            self.gates.open(body["queue"])
        return answer

    def queues(self) -> dict[str, Any]:
        return self.store.queues()

    def depth(self, queue: str) -> dict[str, Any]:
        answer = self.store.depth(queue)
        if answer is None:
            raise EphemeralQueueNotFound(f"Ephemeral queue {queue} does not exist")
        return answer

    def totals(self) -> dict[str, Any]:
        return {**self.store.totals(), "waitingPops": self.gates.waiting()}

    def start(self) -> None:
        """Nothing to start: a gate exists while a pop waits on it."""

    def stop(self) -> None:
        self.gates.stop()


def _reply(answer: dict[str, Any]) -> dict[str, Any]:
    return {"queue": answer["queue"], "messages": answer["messages"]}
