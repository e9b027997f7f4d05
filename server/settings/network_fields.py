"""The settings that make a server safe to share on a network (issue 29): TLS, several API
keys, rate limits, trusted proxies, CORS origins and a per-key share of the queue. KoboldCpp's
keys (`ssl`, `ratelimit`) and llama-server's flags (`--ssl-cert-file`, `--api-key`,
`--api-key-file`, `--cors-origins`) beside Hearth's own. Kept apart so the settings model stays
readable; `HearthSettings` inherits them, so they are ordinary settings everywhere (command
line, .kcpps, launcher).

Only the settings live here; what applies them: the TLS files and the bind warning in
server/process, the keys, rate limits, client addresses and CORS in server/dialects, the fair
queue in server/core/scheduling/request_queue.py.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags


class NetworkFields(BaseModel):
    # KoboldCpp's --ssl CERT KEY (.kcpps: null or [cert, key]).
    ssl: list[str] | None = Field(
        default=None,
        description="Serve HTTPS with this certificate and private key (PEM files).",
        json_schema_extra=flags("--ssl", nargs=2, metavar=("CERT", "KEY")),
    )
    # llama-server's spellings of the same two files.
    ssl_cert_file: str | None = Field(
        default=None,
        description="Serve HTTPS with this PEM certificate (with --ssl-key-file).",
        json_schema_extra=flags("--ssl-cert-file", metavar="FILE"),
    )
    ssl_key_file: str | None = Field(
        default=None,
        description="The PEM private key of --ssl-cert-file.",
        json_schema_extra=flags("--ssl-key-file", metavar="FILE"),
    )
    # llama-server's --api-key k1,k2: any of them opens the text APIs, beside --password.
    api_key: str | None = Field(
        default=None,
        description="API keys that open the text APIs, comma-separated (beside --password).",
        json_schema_extra=flags("--api-key", metavar="KEY[,KEY]"),
    )
    # llama-server's --api-key-file: one key per line, `#` comments; Hearth also reads
    # `name:key` lines, and shows the name instead of the key.
    api_key_file: str | None = Field(
        default=None,
        description="File of API keys, one per line (name:key gives it a name shown instead "
        "of the key; # starts a comment); re-read on SIGHUP and by the admin reload.",
        json_schema_extra=flags("--api-key-file", metavar="FILE"),
    )
    # KoboldCpp's --ratelimit N: seconds between two generation requests from one address.
    ratelimit: int = Field(
        default=0,
        ge=0,
        le=86400,
        description="Seconds a client address must wait between two generation requests "
        "(0: no limit).",
        json_schema_extra=flags("--ratelimit", metavar="SECONDS"),
    )
    # Hearth's own: the same per API key (a client that changes address keeps its key).
    keyratelimit: int = Field(
        default=0,
        ge=0,
        le=86400,
        description="Seconds one API key must wait between two generation requests (0: no limit).",
        json_schema_extra=flags("--keyratelimit", metavar="SECONDS"),
    )
    # Hearth's own: the proxies whose X-Forwarded-For names the real client (deploy/nginx).
    trustedproxies: list[str] | None = Field(
        default=None,
        description="Addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For "
        "names the client; from any other peer the header is ignored.",
        json_schema_extra=flags("--trustedproxies", nargs="+", metavar="ADDR"),
    )
    # llama-server's --cors-origins: the web origins whose pages may call the API.
    # None: not given, which is `*` unless server tools are on (then `localhost`).
    cors_origins: str | None = Field(
        default=None,
        description="Web origins whose pages may call the API, comma-separated; localhost: "
        "pages of this machine only; * (the default, but localhost with --tools or MCP "
        "servers): any.",
        json_schema_extra=flags("--cors-origins", metavar="ORIGIN[,ORIGIN]|localhost|*"),
    )
    # Hearth's own: the places of the multiuser queue one key (or address) may hold.
    multiuserperkey: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="Requests in flight one API key (or, without keys, one address) may "
        "have, within --multiuser (0: no share of its own).",
        json_schema_extra=flags("--multiuserperkey"),
    )

    @field_validator("ssl", "trustedproxies", mode="before")
    @classmethod
    def _word_list(cls, value: Any) -> Any:
        # A .kcpps may hold a list, a string, or "" / [] for none.
        if isinstance(value, str):
            value = value.replace(",", " ").split()
        if isinstance(value, list):
            words = [str(item).strip() for item in value if str(item).strip()]
            return words or None
        return value

    @field_validator("trustedproxies")
    @classmethod
    def _networks(cls, value: list[str] | None) -> list[str] | None:
        # Checked here so that a typo is a usage error at start, not a failure after loading.
        for entry in value or ():
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"--trustedproxies {entry}: not an address or a network (CIDR)"
                ) from None
        return value

    @field_validator("ssl_cert_file", "ssl_key_file", "api_key", "api_key_file", mode="before")
    @classmethod
    def _blank_text_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    def tls_files(self) -> tuple[str, str] | None:
        """(certificate, private key) to serve HTTPS with, or None for plain HTTP. KoboldCpp's
        `ssl` pair wins over llama-server's two flags. ValueError when only half is given."""
        if self.ssl:
            if len(self.ssl) != 2:
                raise ValueError("--ssl takes two files: the certificate, then its key")
            return self.ssl[0], self.ssl[1]
        if self.ssl_cert_file and self.ssl_key_file:
            return self.ssl_cert_file, self.ssl_key_file
        if self.ssl_cert_file or self.ssl_key_file:
            raise ValueError("--ssl-cert-file and --ssl-key-file go together")
        return None

    def cors_origin_list(self, *, tools_on: bool = False) -> list[str]:
        """--cors-origins as a list: ["*"], ["localhost"], or the origins named. Not given, it
        is ["*"], or ["localhost"] when `tools_on` (llama-server's rule: pages from elsewhere
        must not reach tools that act on this machine)."""
        if self.cors_origins is None:
            return ["localhost"] if tools_on else ["*"]
        return [part.strip() for part in self.cors_origins.split(",") if part.strip()] or ["*"]
