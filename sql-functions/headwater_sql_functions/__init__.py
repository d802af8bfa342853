"""SQL functions for Headwater rules: a funnel step, a bot filter and a currency conversion (a plugin package)."""
