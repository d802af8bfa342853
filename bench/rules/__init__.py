"""Rules benchmark: rule latency per kind at 1 and N rules, apply -> first output, pipeline cost per rule count."""
