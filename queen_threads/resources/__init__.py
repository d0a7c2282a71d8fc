"""HTTP resources: one module per route family, each responder parse -> one call -> reply."""
