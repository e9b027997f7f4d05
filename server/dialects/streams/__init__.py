"""Writing answers: `wire` (`WireFormat`, the one interface each dialect's formatter fills),
`streaming` (SSE and NDJSON responses, keep-alives by the wire's silence, disconnects),
`resumable` (streams that outlive their connection) and `stream_resume_log` (llama-server's
conversation log).

May import: `server.dialects.chat`, `server.dialects.edge`, the core.
"""
