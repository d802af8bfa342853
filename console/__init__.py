"""The operator's console: a read-only web page with live charts of what the stack already exposes."""
