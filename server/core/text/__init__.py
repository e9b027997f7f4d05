"""Generated text on its way to a client: `text_stream` (token bytes into whole characters, stop
strings held back), `reasoning` (a thinking model's thought told from its answer as the text
streams) and `loops` (telling a reply that repeats one span, to end a tool call that loops).

May import: the standard library.
"""
