"""Running requests: `scheduler` (`Scheduler`, the front the dialects use) over `request_queue`
(the line and KoboldCpp's rules), `worker` (the generation thread, one job at a time or
batched), `model_lifecycle` (switching, keep_alive, unloading) and `observation` (perf,
/metrics, the live view); `job` is one admitted request as both threads see it, `counters`
the totals. `engine` is the Engine protocol the worker drives, `engine_pool` the models behind
it (a pool of one when one model is served).

May import: the rest of the core but `llama`, `server.models`, `server.devices`, `server.base`.
"""
