"""Pipeline benchmark: generated events, decode/aggregate throughput and end-to-end latency."""
