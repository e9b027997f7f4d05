"""Tool calls read while the model writes them: `tool_stream` (the chat events and the parser
base every format builds on), one parser per format of a model's own (`tool_formats_json`:
Hermes and JSON calls; `_llama3`, `_mistral`, `_xml`: Qwen3-Coder, `_harmony`: gpt-oss),
chosen by `tool_formats_live`, and `tool_formats_bound`, the grammar-bound JSON call of a
model without a format (its schema, its reading, a cut call closed where it stops).

May import: `server.core.templates`, `server.core.types`, the standard library.
"""
