"""Streaming SQL rules: the model, store, views, analysis, outputs, functions and CLI (docs/rules.md)."""
