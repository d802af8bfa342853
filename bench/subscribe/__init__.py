"""The subscription server's benchmark (`python -m bench.subscribe`, `make bench-subscribe`)."""
