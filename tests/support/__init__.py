"""What the tests share: free ports, waits on a condition, the real broker read back, keys, events, fakes."""
