"""Hearth's desktop launcher (PySide6), in the style of KoboldCpp's: tabs that edit the settings
(saved as `.kcpps` files), Launch starting the server in a subprocess, and a running view of
its log, queue and requests.

May import: `server.settings`, `server.models`, `server.devices`, `server.base` and PySide6.
Never llama_cpp, `server.core`, `server.dialects`, `server.process` or FastAPI: a broken GPU
driver or model must not take the window down, so everything that loads llama.cpp runs in a
child process (the server, `hearth list-devices`). `make lint` (import-linter) checks it.
"""
