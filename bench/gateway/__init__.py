"""`make bench`: the gateway's throughput against its in-process bound, and ack latency at half load."""
