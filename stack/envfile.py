"""Re-exports `common.envfile` (the env-file reader moved there) for code written before the move; import
`common.envfile` in new code, and in anything deployed (nothing deployed may import `stack/`)."""

from common.envfile import read_env, write_env

__all__ = ["read_env", "write_env"]
