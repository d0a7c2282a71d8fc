"""Administration and analytics (docs/api-admin.md): messages, consumer groups, traces,
resource listings, clearing a queue, refreshing statistics, the status routes and the
dashboard's charts. routes/ the falcon resources (one module per route family, their rows
in routes/__init__.py); store.py and analytics_store.py the only callers of their
statements."""
