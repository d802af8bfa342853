"""Headwater's subscription server: any stream pushed to HTTP clients as Server-Sent Events, resumable by position."""
