"""Jobs that run beside the requests: retention, eviction and partition cleanup (one
runner across processes and instances, under an advisory lock), and the maintenance-mode
switches every process refreshes."""
