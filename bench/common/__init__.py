"""What more than one benchmark uses: the workload, the worker and gateway processes, the calls
to Redis and the latency percentiles."""
