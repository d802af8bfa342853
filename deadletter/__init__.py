"""Dead-letter operations: list, summarise, show and replay the records of the dead-letter topic."""
