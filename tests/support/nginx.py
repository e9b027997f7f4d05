"""Running nginx with deploy/nginx/hearth.conf in a scratch folder, for the replicas test and
bench/nginx_replicas.py: the shipped file with its instance addresses and port replaced,
inside a minimal main configuration that keeps every path in the folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.support.servers import ROOT

CONFIG = ROOT / "deploy" / "nginx" / "hearth.conf"
# The shipped file's placeholders: two instances and the port clients use.
SHIPPED_INSTANCES = ("127.0.0.1:5001", "127.0.0.1:5002")
SHIPPED_LISTEN = "listen 8080;"


class NginxMissingError(RuntimeError):
    pass


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:  # .ci/run installs it; say how elsewhere
        raise NginxMissingError("nginx is not installed (Debian: apt install nginx)")
    return found


def nginx_config(folder: Path, instances: Sequence[str], port: int) -> Path:
    """A whole nginx configuration around the shipped file, everything under `folder`."""
    site = CONFIG.read_text()
    assert all(shipped in site for shipped in SHIPPED_INSTANCES) and SHIPPED_LISTEN in site
    for shipped, instance in zip(SHIPPED_INSTANCES, instances, strict=True):
        site = site.replace(shipped, instance)
    site = site.replace(SHIPPED_LISTEN, f"listen 127.0.0.1:{port};")
    (folder / "hearth.conf").write_text(site)
    temp = {name: folder / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    # As root nginx's workers would drop to `nobody`, who cannot use these folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {folder}/nginx.pid;\n"
        f"error_log {folder}/error.log warn;\nevents {{ worker_connections 256; }}\n"
        "http {\n  access_log off;\n"
        f"  client_body_temp_path {temp['body']};\n  proxy_temp_path {temp['proxy']};\n"
        f"  fastcgi_temp_path {temp['fastcgi']};\n  uwsgi_temp_path {temp['uwsgi']};\n"
        f"  scgi_temp_path {temp['scgi']};\n  include {folder}/hearth.conf;\n}}\n"
    )
    return main


def start_nginx(folder: Path, instances: Sequence[str], port: int) -> subprocess.Popen[bytes]:
    """nginx in the foreground, serving `instances` on 127.0.0.1:`port`."""
    config = nginx_config(folder, instances, port)
    return subprocess.Popen(
        [nginx_binary(), "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_nginx(nginx: subprocess.Popen[bytes]) -> None:
    nginx.terminate()
    nginx.wait(timeout=20)
