"""`make demo`: the whole flow on the running local stack, for a first look (development only, like `stack/`)."""
