"""How a component reaches the schema registry securely: its HTTP basic credentials and the CA it trusts, read once
from the environment (`REGISTRY_BASIC_AUTH_USER_INFO_FILE` or `REGISTRY_BASIC_AUTH_USER_INFO` = `user:password`, as
Confluent's `basic.auth.user.info`; `REGISTRY_SSL_CA_LOCATION`), per-component names first
(`HEADWATER_<COMPONENT>_REGISTRY_...`, see common/component_env.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from common.basic_auth import AuthConfigError, authorization, user_info
from common.tls import ca_file


@dataclass(frozen=True)
class RegistryAccess:
    """Credentials (None: anonymous) and CA bundle ("" : the system store) for one component's registry calls."""

    credentials: tuple[str, str] | None = field(default=None, repr=False)
    ca_file: str = ""

    @property
    def user(self) -> str:
        return self.credentials[0] if self.credentials else ""

    def headers(self) -> dict[str, str]:
        """The Authorization header to add to every request (none when anonymous)."""
        return {"Authorization": authorization(self.credentials)} if self.credentials else {}

    def confluent(self) -> dict[str, str]:
        """Settings for confluent-kafka's SchemaRegistryClient (merge with its `url`)."""
        conf = {"basic.auth.user.info": f"{self.credentials[0]}:{self.credentials[1]}"} if self.credentials else {}
        return conf | ({"ssl.ca.location": self.ca_file} if self.ca_file else {})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, component: str = "") -> RegistryAccess:
        """Raises AuthConfigError naming a bad variable."""
        env = os.environ if env is None else env
        return cls(user_info(env, "REGISTRY_BASIC_AUTH_USER_INFO", component),
                   ca_file(env, "REGISTRY_SSL_CA_LOCATION", component, AuthConfigError))
