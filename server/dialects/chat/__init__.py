"""Planning a chat and reading its answer, for every dialect: `plans` (`plan_chat`: the
template rendered, tools and the thought decided; `ChatPlan`), `answers` (`ChatAnswer`,
`TokenCollector`), `request_fields` (message text, stop lists, ids), `chat_reading`
(`ChatReader`, the one reader of a generation's events, streamed or whole), `thinking` (what a
request asks of thinking), `token_bias` (`logit_bias` in each shape) and `function_tools`.

May import: `server.dialects.edge`, `server.dialects.media`, the core.
"""
