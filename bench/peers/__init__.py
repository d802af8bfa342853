"""`make bench-peers`: the gateway against a native peer (Benthos v4.27.0) doing the same job on the same broker."""
