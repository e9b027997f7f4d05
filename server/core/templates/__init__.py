"""Chat conversations and their templates: `chat` (the turns every dialect converts its messages
into, and `ChatTemplate`, which renders them), `template_jinja` (the sandboxed Jinja
environment and its errors), `named_templates` (`--chat-template NAME`), `template_polyfills`
(tool calls and results a template does not show, written into what it does) and
`tool_formats` (a template's own tool-call format, told from its text).

May import: `server.core.types` and the standard library (jinja2 for templates).
"""
