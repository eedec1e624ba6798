"""What a pool counts: domain counters per committed batch, each worker's own metrics, and
their Prometheus exposition."""
