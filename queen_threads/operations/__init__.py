"""The server's own routes (health, metrics, peer notifications, maintenance switches,
the dashboard's files); what they read belongs to the shared plumbing."""
