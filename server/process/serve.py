"""What `hearth` runs: the command line, then the launcher, an RPC-supervised child, a
subcommand, or the server itself (server/process/start.py).

`main` is the server's entry point: `python -m server` (server/__main__.py), and under `hearth`
(hearth/__main__.py, also the packaged binary), which hands it the launcher to open; this
package never imports the launcher. `list-devices` and `rpc-worker` are subcommands of it.
Each path imports only what it runs: the server's web stack and the model code cost over a
second of CPU to import, which `hearth rpc-worker`, `--help` and a mistyped option never pay.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from server.devices.rpc_endpoints import RpcAddressError, worker_endpoints
from server.process.console import announce_not_applied, setup_console_logging
from server.process.exit_codes import EXIT_USAGE
from server.process.parent_watch import stop_when_launcher_leaves
from server.process.rpc_supervisor import run_supervised, supervised
from server.process.tls import TlsFileError, checked_tls_files
from server.settings.cli import CommandLine, build_parser, parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError

# Opens the launcher, prefilled with the settings given (None: nothing was given).
OpenLauncher = Callable[[HearthSettings | None], int]

NO_LAUNCHER_MESSAGE = (
    "hearth: no model and no settings file given; the launcher opens from `hearth` "
    "(python -m hearth). To serve the bundled model here, add --skiplauncher.\n"
)


def main(argv: Sequence[str] | None = None, open_launcher: OpenLauncher | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["list-devices"]:  # llama-server's --list-devices, as a subcommand
        from server.process.list_devices import main as list_devices

        return list_devices(arguments[1:])
    if arguments[:1] == ["rpc-worker"]:  # llama.cpp's rpc-server, from the same libraries
        from server.process.rpc_worker import main as rpc_worker

        return rpc_worker(arguments[1:])
    try:
        command_line = parse_command_line(argv)
    except SettingsFileError as exc:
        sys.stderr.write(f"hearth: settings file {exc}\n")
        return EXIT_USAGE
    except ValidationError as exc:
        from server.dialects.edge.errors import describe_validation_error

        sys.stderr.write(f"hearth: invalid option: {describe_validation_error(exc)}\n")
        return EXIT_USAGE
    settings = command_line.settings
    if wants_launcher(command_line):
        if open_launcher is None:
            sys.stderr.write(NO_LAUNCHER_MESSAGE)
            return EXIT_USAGE
        return open_launcher(settings if command_line.model_or_config_given else None)
    if settings.rpc and not supervised():
        # llama.cpp aborts a process that loses an RPC worker: serve from a child, so that
        # this one can say which worker was lost.
        try:
            endpoints = worker_endpoints(settings.rpc)
        except RpcAddressError as exc:
            sys.stderr.write(f"hearth: {exc}\n")
            return EXIT_USAGE
        return run_supervised(arguments, endpoints)
    setup_console_logging()
    announce_not_applied(settings, _settings_file_name(arguments))
    try:
        tls = checked_tls_files(settings)  # before the web stack and the model load
    except TlsFileError as exc:
        logging.getLogger("hearth").error("hearth: %s", exc)
        return EXIT_USAGE
    from server.process.start import serve

    stop_when_launcher_leaves(_request_shutdown)
    return serve(settings, tls)


def _settings_file_name(arguments: list[str]) -> str | None:
    """The name of the settings file given (--config or the positional .kcpps), for the
    console. A positional GGUF is named too, harmlessly: without a settings file there are no
    keys to report."""
    given = vars(build_parser().parse_args(arguments))
    path = given.get("config") or given.get("model_or_config")
    return Path(path).name if path else None


def _request_shutdown() -> None:
    """Stop as Stop in the launcher does: SIGTERM, which uvicorn turns into its graceful
    shutdown. `raise_signal` rather than `os.kill`: on Windows the latter terminates at once."""
    signal.raise_signal(signal.SIGTERM)


def wants_launcher(command_line: CommandLine) -> bool:
    """KoboldCpp's rule: the launcher opens when no model and no config were given, or with
    --showgui; --skiplauncher always serves."""
    settings = command_line.settings
    if settings.skiplauncher:
        return False
    return settings.showgui or not command_line.model_or_config_given
