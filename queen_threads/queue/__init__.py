"""The queue core (docs/api.md): push, pop, ack, lease extension, configure.

routes/ the falcon resources (one module per route family, their rows in
routes/__init__.py); body.py what a request may carry; service.py `QueueService` (the
store call plus wake-ups); store.py the only caller of the queue core's statements;
metrics.py its measuring points; push_batcher.py the push group commit; polling.py and
popper.py the long-poll machinery wired to the store.
"""
