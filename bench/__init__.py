"""Benchmarks of the deployables, kept out of their packages: `python -m bench.gateway`, `python -m bench.spark`."""
