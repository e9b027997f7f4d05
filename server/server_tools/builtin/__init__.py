"""The tools `--tools` names: `builtin` (`builtin_tools`), `builtin_files` (read, write and
edit a file; `text_edits` matches the edits), `file_search` (glob and grep a folder; `globs`)
and `shell` (run a command).

May import: `server.server_tools` (`registry`, `tool_base`, `runtimes`), the standard
library.
"""
