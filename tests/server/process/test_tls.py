"""HTTPS and the warning for a server shared without a key (issue 29, parts 1 and 6).

One real server on the bundled model serves HTTPS with a certificate made here (trustme), and
the official openai, anthropic and ollama clients stream from it, each trusting only the test's
own certificate authority. Files that cannot serve HTTPS stop `python -m server` with one line
naming the file, before anything loads; the llama-server spellings of the two files serve as
KoboldCpp's `--ssl` does (on the scripted engine).
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx
import httpx2
import ollama
import openai
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from server.process.console import announce_start
from server.process.exit_codes import EXIT_USAGE
from server.process.tls import TlsFileError, TlsFiles, checked_tls_files
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import ROOT, RunningServer, free_port
from tests.support.sse import iter_sse

STREAM = "/api/extra/generate/stream"
SHORT = 8  # tokens per reply: the point is the transport, not the text


@dataclass(frozen=True)
class Certificates:
    """A certificate for 127.0.0.1 and its key, a key of another certificate, and a client
    context that trusts their authority (and nothing else)."""

    certificate: Path
    key: Path
    other_key: Path
    trust: ssl.SSLContext

    def key_body(self) -> str:
        """A line from the middle of the key's PEM: text that must never be printed."""
        return self.key.read_text().splitlines()[1]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    folder = tmp_path_factory.mktemp("tls")
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    issued.cert_chain_pems[0].write_to_path(folder / "cert.pem")
    issued.private_key_pem.write_to_path(folder / "key.pem")
    other = authority.issue_cert("localhost")
    other.private_key_pem.write_to_path(folder / "other-key.pem")
    trust = ssl.create_default_context(cadata=authority.cert_pem.bytes().decode())
    return Certificates(folder / "cert.pem", folder / "key.pem", folder / "other-key.pem", trust)


@pytest.fixture(scope="module")
def https_hearth(
    start_hearth: Callable[..., RunningServer], certificates: Certificates
) -> RunningServer:
    """The real server with KoboldCpp's `--ssl CERT KEY`."""
    flags = ["--ssl", str(certificates.certificate), str(certificates.key)]
    return start_hearth(flags, trust=certificates.trust)


# -- the official clients over HTTPS -------------------------------------------------------------


def test_openai_client_streams_over_https(
    https_hearth: RunningServer, certificates: Certificates
) -> None:
    with httpx.Client(verify=certificates.trust) as http:
        client = openai.OpenAI(
            base_url=f"{https_hearth.base_url}/v1", api_key="unused", http_client=http
        )
        chunks = list(
            client.chat.completions.create(
                model="any",
                messages=[{"role": "user", "content": "Say hello."}],
                max_tokens=SHORT,
                stream=True,
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("length", "stop")


def test_anthropic_client_streams_over_https(
    https_hearth: RunningServer, certificates: Certificates
) -> None:
    # This SDK speaks through httpx2 (httpx's successor), and takes only its clients.
    with httpx2.Client(verify=certificates.trust) as http:
        client = anthropic.Anthropic(
            base_url=https_hearth.base_url, api_key="unused", http_client=http
        )
        with client.messages.stream(
            model="any",
            max_tokens=SHORT,
            messages=[{"role": "user", "content": "Say hello."}],
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert text
    assert final.stop_reason in ("max_tokens", "end_turn")


def test_ollama_client_streams_over_https(
    https_hearth: RunningServer, certificates: Certificates
) -> None:
    client = ollama.Client(host=https_hearth.base_url, verify=certificates.trust)
    parts = list(
        client.chat(
            model="any",
            messages=[{"role": "user", "content": "Say hello."}],
            options={"num_predict": SHORT},
            stream=True,
        )
    )
    assert "".join(part.message.content or "" for part in parts)
    assert parts[-1].done and not any(part.done for part in parts[:-1])


# -- what HTTPS refuses, and what the console says ----------------------------------------------


def test_plain_http_to_the_https_port_fails(https_hearth: RunningServer) -> None:
    plain = https_hearth.base_url.replace("https://", "http://")
    printed = len(https_hearth.output)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{plain}/api/extra/version", timeout=10.0)
    # The server shrugs it off: it still answers over HTTPS, and printed no traceback.
    with https_hearth.client() as client:
        assert client.get("/api/extra/version").status_code == 200
    assert "Traceback" not in "".join(https_hearth.output[printed:])


def test_a_client_that_does_not_trust_the_certificate_is_refused(
    https_hearth: RunningServer,
) -> None:
    # The machine's own trust store has never heard of the test's authority.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_hearth.base_url}/api/extra/version", timeout=10.0)


def test_console_says_https_and_never_prints_the_key(
    https_hearth: RunningServer, certificates: Certificates
) -> None:
    addresses = https_hearth.wait_for_output("KoboldAI API:")
    assert f"{https_hearth.base_url}/api/" in addresses
    assert str(certificates.key) in https_hearth.wait_for_output("HTTPS: certificate")
    assert "http://" not in "".join(https_hearth.output)
    assert certificates.key_body() not in "".join(https_hearth.output)


# -- llama-server's spellings (scripted engine) -------------------------------------------------


@pytest.mark.parametrize("spelling", ["koboldcpp", "llama-server"])
def test_both_spellings_of_the_files_serve_https(
    spelling: str, certificates: Certificates, serve_engine: Callable[..., RunningServer]
) -> None:
    cert, key = str(certificates.certificate), str(certificates.key)
    flags = (
        ["--ssl", cert, key]
        if spelling == "koboldcpp"
        else ["--ssl-cert-file", cert, "--ssl-key-file", key]
    )
    settings = parse_command_line(["--skiplauncher", *flags]).settings
    tls = checked_tls_files(settings)
    assert tls == TlsFiles(certificates.certificate, certificates.key)
    server = serve_engine(ScriptedEngine(pieces=[b"Hi", b" there"]), settings, tls=tls)
    assert server.base_url.startswith("https://")
    with (
        httpx.Client(base_url=server.base_url, verify=certificates.trust) as client,
        client.stream("POST", STREAM, json={"prompt": "x", "max_length": 2}) as response,
    ):
        assert response.status_code == 200
        tokens = [event.json()["token"] for event in iter_sse(response) if event.data]
    assert tokens == ["Hi", " there", ""]


# -- files that cannot serve HTTPS: one line, before anything loads ----------------------------


def _start_fails(flags: Sequence[str]) -> str:
    """Run `python -m server` with `flags`; assert it stopped with the usage exit code and
    printed exactly one line (a model load would print several); return that line."""
    finished = subprocess.run(
        [sys.executable, "-m", "server", "--skiplauncher", "--port", str(free_port()), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    printed = (finished.stdout + finished.stderr).splitlines()
    assert finished.returncode == EXIT_USAGE, printed
    assert len(printed) == 1, printed
    return printed[0]


def test_a_missing_certificate_stops_the_start(certificates: Certificates, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-cert.pem"
    line = _start_fails(["--ssl", str(missing), str(certificates.key)])
    assert line == f"hearth: TLS certificate {missing}: no such file"


def test_a_key_of_another_certificate_stops_the_start(certificates: Certificates) -> None:
    cert, other = certificates.certificate, certificates.other_key
    line = _start_fails(["--ssl-cert-file", str(cert), "--ssl-key-file", str(other)])
    assert line == f"hearth: TLS private key {other}: does not match the certificate {cert}"
    assert certificates.key_body() not in line


def test_half_a_pair_stops_the_start(certificates: Certificates) -> None:
    cert = certificates.certificate
    line = _start_fails(["--ssl-cert-file", str(cert)])
    assert line == f"hearth: --ssl-cert-file {cert}: --ssl-key-file (its private key) is missing"


def _tls_error(**given: object) -> str:
    with pytest.raises(TlsFileError) as raised:
        checked_tls_files(HearthSettings.model_validate(given))
    return str(raised.value)


def test_every_other_unusable_file_is_named(certificates: Certificates, tmp_path: Path) -> None:
    cert, key = str(certificates.certificate), str(certificates.key)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a PEM file\n")
    assert _tls_error(ssl=[str(junk), key]) == f"TLS certificate {junk}: no PEM certificate in it"
    assert _tls_error(ssl=[cert, str(junk)]) == f"TLS private key {junk}: no PEM private key in it"
    assert _tls_error(ssl=[cert, cert]) == f"TLS private key {cert}: no PEM private key in it"
    assert _tls_error(ssl=[str(tmp_path), key]) == f"TLS certificate {tmp_path}: not a file"
    assert _tls_error(ssl_key_file=key) == (
        f"--ssl-key-file {key}: --ssl-cert-file (its certificate) is missing"
    )
    assert _tls_error(ssl=[cert]) == f"--ssl {cert}: give two files, the certificate and its key"


def test_a_key_under_a_passphrase_is_refused_without_a_prompt(
    certificates: Certificates, tmp_path: Path
) -> None:
    # Without a check, OpenSSL would ask for the passphrase on a terminal the server lacks.
    plain = serialization.load_pem_private_key(certificates.key.read_bytes(), None)
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_bytes(
        plain.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    message = _tls_error(ssl=[str(certificates.certificate), str(encrypted)])
    assert message.startswith(f"TLS private key {encrypted}: encrypted with a passphrase")


def test_no_files_means_plain_http() -> None:
    assert checked_tls_files(HearthSettings()) is None


# -- the warning for a server shared without a key ----------------------------------------------


def test_sharing_without_a_key_warns_what_anyone_can_do(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings(host="0.0.0.0", admin=True), "m")
    warning = caplog.text
    assert "WARNING: listening on 0.0.0.0 without --password, --api-key or --api-key-file" in (
        warning
    )
    assert "generate text and embeddings with every API" in warning
    assert "read the loaded model's name" in warning
    assert "switch models (--admin without --adminpassword)" in warning
    assert "Set a key with --password, --api-key or --api-key-file" in warning


@pytest.mark.parametrize(
    "guarded",
    [
        {"host": "0.0.0.0", "password": "pw"},
        {"host": "0.0.0.0", "api_key": "k1,k2"},
        {"host": "0.0.0.0", "api_key_file": "keys.txt"},
        {"host": "127.0.0.1"},
    ],
)
def test_no_warning_with_a_key_or_on_loopback(
    guarded: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings.model_validate(guarded), "m")
    assert "WARNING" not in caplog.text
    assert "switch models" not in caplog.text


def test_admin_with_its_own_password_is_not_named(caplog: pytest.LogCaptureFixture) -> None:
    settings = HearthSettings(host="0.0.0.0", admin=True, adminpassword="admin")
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(settings, "m")
    assert "without --password" in caplog.text
    assert "switch models" not in caplog.text
