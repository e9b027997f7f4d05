"""Where a tool runs: `runtimes` reads a runtime spec (this machine, `docker-container:ID`,
`podman-container:ID`, `ssh:TARGET`) into a `runtime_io` interface, done by `runtime_host` and
`runtime_isolate`; `runtime_spawn` starts `--tools-runtime docker:IMAGE`'s container;
`process_run` streams, caps and stops a process.

May import: `server.server_tools.registry`, the standard library.
"""
