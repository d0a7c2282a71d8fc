"""Waking the poll workers of other processes and instances: the LISTEN/NOTIFY listener,
and the HTTP/UDP peers (authenticated with QUEEN_PEER_SECRET)."""
