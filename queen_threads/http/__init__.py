"""HTTP plumbing shared by every route: errors, middleware, request parsing."""
