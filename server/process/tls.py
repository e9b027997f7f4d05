"""HTTPS: the certificate and private key (KoboldCpp's `--ssl CERT KEY`, llama-server's
`--ssl-cert-file` / `--ssl-key-file`), checked once before the model loads.

uvicorn alone would find a missing file, a key of another certificate or half a pair only
once the model had loaded, as a traceback; and for a key under a passphrase OpenSSL would ask
for it on a terminal a headless server does not have. Here each becomes one line naming the
file. Only paths ever reach a message: never a byte of the key.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from server.settings.config import HearthSettings

_CERTIFICATE = "TLS certificate"
_KEY = "TLS private key"


class TlsFileError(Exception):
    """The certificate or key cannot serve HTTPS; the message is the console's line."""


@dataclass(frozen=True)
class TlsFiles:
    """A certificate and the private key that matches it, both checked readable PEM."""

    certificate: Path
    key: Path


def given_tls_files(settings: HearthSettings) -> tuple[str, str] | None:
    """The (certificate, key) the settings name, unchecked; None for none or half a pair
    (which serves nothing: checked_tls_files says why before anything is printed)."""
    try:
        return settings.tls_files()
    except ValueError:
        return None


def url_scheme(settings: HearthSettings) -> str:
    return "http" if given_tls_files(settings) is None else "https"


def checked_tls_files(settings: HearthSettings) -> TlsFiles | None:
    """The TLS files to serve HTTPS with, checked; None for plain HTTP. TlsFileError names
    the file at fault: half a pair, a file missing or unreadable, no certificate in the
    certificate file, no usable key in the key file, or a key of another certificate."""
    pair = settings.tls_files() if _whole_pair(settings) else None
    if pair is None:
        return None
    certificate, key = (Path(name).expanduser() for name in pair)
    _check_readable(_CERTIFICATE, certificate)
    _check_readable(_KEY, key)
    _check_certificate(certificate)
    _check_key(certificate, key)
    return TlsFiles(certificate, key)


def _whole_pair(settings: HearthSettings) -> bool:
    """True when TLS files are given as a pair; False for none; TlsFileError for half."""
    if settings.ssl:
        if len(settings.ssl) != 2:
            given = " ".join(settings.ssl)
            raise TlsFileError(f"--ssl {given}: give two files, the certificate and its key")
        return True
    cert, key = settings.ssl_cert_file, settings.ssl_key_file
    if cert and not key:
        raise TlsFileError(f"--ssl-cert-file {cert}: --ssl-key-file (its private key) is missing")
    if key and not cert:
        raise TlsFileError(f"--ssl-key-file {key}: --ssl-cert-file (its certificate) is missing")
    return bool(cert and key)


def _check_readable(role: str, path: Path) -> None:
    if not path.exists():
        raise TlsFileError(f"{role} {path}: no such file")
    if not path.is_file():
        raise TlsFileError(f"{role} {path}: not a file")
    try:
        with path.open("rb"):
            pass  # opened, not read: the key's bytes are read once, by OpenSSL
    except OSError as exc:
        raise TlsFileError(f"{role} {path}: cannot be read ({exc.strerror})") from None


def _check_certificate(certificate: Path) -> None:
    """The certificate file holds at least one PEM certificate (told apart from the key's
    problems, which load_cert_chain reports alike)."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=certificate)
    except (ssl.SSLError, ValueError):
        raise TlsFileError(f"{_CERTIFICATE} {certificate}: no PEM certificate in it") from None


class _PassphraseAsked(Exception):
    pass


def _refuse_passphrase() -> str:
    # OpenSSL asks only for an encrypted key; without this it would prompt on the terminal.
    raise _PassphraseAsked


def _check_key(certificate: Path, key: Path) -> None:
    """The key file holds an unencrypted PEM key that matches the certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certificate, key, password=_refuse_passphrase)
    except _PassphraseAsked:
        raise TlsFileError(
            f"{_KEY} {key}: encrypted with a passphrase; give it unencrypted "
            f"(openssl pkey -in {key} -out plain-key.pem)"
        ) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TlsFileError(
                f"{_KEY} {key}: does not match the certificate {certificate}"
            ) from None
        raise TlsFileError(f"{_KEY} {key}: no PEM private key in it") from None
    except OSError as exc:  # gone or unreadable since it was opened
        raise TlsFileError(f"{_KEY} {key}: cannot be read ({exc.strerror})") from None
