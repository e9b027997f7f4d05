"""The Network tab's security fields (issue 29): SSL Cert and SSL Key (KoboldCpp's `ssl` pair in
a .kcpps), API Keys and API Key File, the warning under Host while anyone on the network could
use the server, and the launcher's own way to the server over HTTPS: its addresses say
https://, and its pollers trust the server's certificate and no other."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from PySide6.QtCore import QUrl
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pollers import PerfPoller
from server.process.tls import TlsFiles
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import ROOT, RunningServer

KOBOLDCPP_FILE = ROOT / "tests" / "fixtures" / "koboldcpp-saved.kcpps"


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def issued(authority: trustme.CA, folder: Path, name: str) -> TlsFiles:
    """A certificate for 127.0.0.1 and its key, written into `folder`."""
    leaf = authority.issue_cert("127.0.0.1")
    files = TlsFiles(folder / f"{name}-cert.pem", folder / f"{name}-key.pem")
    leaf.cert_chain_pems[0].write_to_path(files.certificate)
    leaf.private_key_pem.write_to_path(files.key)
    return files


@pytest.fixture
def tls(authority: trustme.CA, tmp_path: Path) -> TlsFiles:
    return issued(authority, tmp_path, "server")


def kcpps(folder: Path, **keys: Any) -> Path:
    """KoboldCpp's own saved file with `keys` changed."""
    path = folder / "loaded.kcpps"
    path.write_text(json.dumps({**json.loads(KOBOLDCPP_FILE.read_text()), **keys}))
    return path


def saved(window: MainWindow, folder: Path) -> dict[str, Any]:
    written = window.save_file(folder / "saved.kcpps")
    assert written is not None, window.notice.text()
    data: dict[str, Any] = json.loads(written.read_text())
    return data


# -- the files, both ways ---------------------------------------------------------------------


def test_a_koboldcpp_ssl_pair_shows_and_saves_back(
    window: MainWindow, tls: TlsFiles, tmp_path: Path
) -> None:
    pair = [str(tls.certificate), str(tls.key)]
    assert window.load_file(kcpps(tmp_path, ssl=pair))
    assert window.network.ssl_cert.text() == pair[0]
    assert window.network.ssl_key.text() == pair[1]
    data = saved(window, tmp_path)
    assert data["ssl"] == pair
    assert data["ssl_cert_file"] is None and data["ssl_key_file"] is None


def test_no_ssl_saves_back_as_null(window: MainWindow, tmp_path: Path) -> None:
    assert window.load_file(kcpps(tmp_path))  # KoboldCpp writes "ssl": null
    assert window.network.ssl_cert.text() == "" and window.network.ssl_key.text() == ""
    assert saved(window, tmp_path)["ssl"] is None


def test_files_typed_in_save_as_the_koboldcpp_pair(
    window: MainWindow, tls: TlsFiles, tmp_path: Path
) -> None:
    # A file of llama-server's two keys, or two files typed in: KoboldCpp's pair once saved.
    assert window.load_file(
        kcpps(tmp_path, ssl_cert_file=str(tls.certificate), ssl_key_file=str(tls.key))
    )
    assert window.network.ssl_key.text() == str(tls.key)
    assert saved(window, tmp_path)["ssl"] == [str(tls.certificate), str(tls.key)]


def test_api_keys_and_their_file_round_trip(window: MainWindow, tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("alice:k1\n")
    assert window.load_file(kcpps(tmp_path, api_key="k2,k3", api_key_file=str(keys_file)))
    assert window.network.api_keys.text() == "k2,k3"
    data = saved(window, tmp_path)
    assert (data["api_key"], data["api_key_file"]) == ("k2,k3", str(keys_file))


def test_half_a_pair_or_a_missing_file_stops_the_launch_beside_the_field(
    window: MainWindow, tls: TlsFiles, tmp_path: Path
) -> None:
    network = window.network
    network.ssl_cert.setText(str(tls.certificate))
    assert window.read_settings() is None
    assert network.error_text("ssl_key_file") == "HTTPS needs both the SSL Cert and its SSL Key."
    network.ssl_key.setText(str(tmp_path / "no-such-key.pem"))
    assert window.read_settings() is None
    assert network.error_text("ssl_key_file") == "No such file."
    network.ssl_key.setText(str(tls.key))
    settings = window.read_settings()
    assert settings is not None and settings.tls_files() == (str(tls.certificate), str(tls.key))


# -- the warning under Host -------------------------------------------------------------------


def test_the_warning_follows_the_host_and_the_keys(window: MainWindow) -> None:
    network = window.network
    warning = network.exposed_warning
    assert warning.isHidden()  # the default host is this computer only
    network.host.setText("0.0.0.0")
    assert not warning.isHidden()
    assert "generate text" in warning.text() and "Password" in warning.text()
    for field in (network.password, network.api_keys, network.api_key_file):
        field.setText("secret")
        assert warning.isHidden()
        field.setText("  ")  # blank is no key
        assert not warning.isHidden()
    network.host.setText("127.0.0.1")
    assert warning.isHidden()
    network.host.setText("192.168.1.20")
    assert not warning.isHidden()


def test_a_loaded_file_that_shares_without_a_key_shows_the_warning(
    window: MainWindow, tmp_path: Path
) -> None:
    assert window.load_file(kcpps(tmp_path, host="0.0.0.0", password=None))
    assert not window.network.exposed_warning.isHidden()
    assert window.load_file(kcpps(tmp_path, host="0.0.0.0", password="pw"))
    assert window.network.exposed_warning.isHidden()


# -- the launcher's way to an HTTPS server ----------------------------------------------------


def test_the_launcher_s_addresses_say_https(
    window: MainWindow, tls: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    window.network.ssl_cert.setText(str(tls.certificate))
    window.network.ssl_key.setText(str(tls.key))
    settings = launched_settings(window, monkeypatch)
    assert settings.tls_files() == (str(tls.certificate), str(tls.key))
    port = window.network.port.value()
    assert f"https://127.0.0.1:{port}" in window.notice.text()
    opened: list[QUrl] = []
    monkeypatch.setattr("app.main_window.QDesktopServices.openUrl", opened.append)
    window.open_chat()
    assert opened == [QUrl(f"https://127.0.0.1:{port}/")]


def _poll_once(window: MainWindow, qtbot: QtBot, server: RunningServer) -> QNetworkReply:
    """Point the window's perf poller at `server` for one request; its finished reply."""
    network = window.poller.findChild(QNetworkAccessManager)
    assert network is not None
    with qtbot.waitSignal(network.finished, timeout=10_000) as answered:
        PerfPoller.start(window.poller, server.base_url)  # launched_settings stubbed it
    window.poller.stop()
    network.clearConnectionCache()  # no kept-alive connection to hold the server's shutdown
    reply: QNetworkReply = answered.args[0]
    return reply


def test_the_pollers_trust_the_server_s_certificate_and_no_other(
    window: MainWindow,
    qtbot: QtBot,
    authority: trustme.CA,
    tls: TlsFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    serve_engine: Callable[..., RunningServer],
) -> None:
    # Signed by an authority Qt has never heard of: only the launcher's pin lets it through.
    server = serve_engine(ScriptedEngine(), HearthSettings(), tls=tls)
    window.network.ssl_cert.setText(str(tls.certificate))
    window.network.ssl_key.setText(str(tls.key))
    launched_settings(window, monkeypatch)
    with qtbot.waitSignal(window.poller.updated, timeout=10_000) as perf:
        reply = _poll_once(window, qtbot, server)
    assert reply.error() == QNetworkReply.NetworkError.NoError
    assert "queue" in perf.args[0]
    # Launched with another certificate, the same server is not trusted.
    other = issued(authority, tmp_path, "other")
    window.network.ssl_cert.setText(str(other.certificate))
    window.network.ssl_key.setText(str(other.key))
    launched_settings(window, monkeypatch)
    reply = _poll_once(window, qtbot, server)
    assert reply.error() == QNetworkReply.NetworkError.SslHandshakeFailedError
