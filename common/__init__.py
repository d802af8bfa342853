"""Code the services share that belongs to none of them (kept free of service imports, so each stays deployable)."""
