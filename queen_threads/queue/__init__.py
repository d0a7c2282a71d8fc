"""The queue as the HTTP layer sees it: the QueueService facade (store call plus wake-ups),
push group commit, and the long-poll machinery wired to the store (PollingService)."""
