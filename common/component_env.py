"""Looks settings up in the environment under a component's own name first (`HEADWATER_<COMPONENT>_<NAME>`), then
under the shared name, and reads secrets from the files variables name, so that secrets stay out of environments."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


class ComponentEnv:
    """One component's view of an environment: `HEADWATER_RULES_KAFKA_SASL_USERNAME` wins over
    `KAFKA_SASL_USERNAME` for the component `rules`, so one environment (such as stack.env) can name a different
    principal for each tool while sharing everything else."""

    def __init__(self, env: Mapping[str, str], component: str = "", *, error: type[Exception] = ValueError) -> None:
        self.env = env
        self.prefix = f"HEADWATER_{component.upper()}_" if component else ""
        self.error = error

    def name(self, var: str) -> str:
        """The name that answers for `var`: the component's own when set, else the shared one."""
        specific = self.prefix + var
        return specific if self.prefix and self.env.get(specific, "").strip() else var

    def get(self, var: str, default: str = "") -> str:
        return self.env.get(self.name(var), "").strip() or default

    def secret(self, var: str) -> str:
        """`<var>_FILE` (the file's first line) or `<var>`, the component's names first; "" when none is set."""
        names = [self.prefix + var + "_FILE", self.prefix + var] if self.prefix else []
        for name in [*names, var + "_FILE", var]:
            raw = self.env.get(name, "").strip()
            if raw and name.endswith("_FILE"):
                return read_secret(name, raw, self.error)
            if raw:
                return raw
        return ""


def read_secret(var: str, path: str, error: type[Exception]) -> str:
    """The first line of the file `path` named by variable `var`, stripped; `error` names the variable, never the
    secret. An empty or unreadable file is an error: an empty password is never what was meant."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise error(f"{var}={path!r}: {exc.strerror}") from None
    if not lines or not lines[0].strip():
        raise error(f"{var}={path!r}: the file is empty")
    return lines[0].strip()
