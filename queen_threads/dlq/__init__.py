"""The dead-letter queue (docs/api-admin.md): listing, requeueing one message, and bulk
requeues. routes.py the falcon resources; body.py a bulk requeue's body rules; service.py
the run of a bulk requeue, chunk by chunk; store.py the only caller of its statements."""
