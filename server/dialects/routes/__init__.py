"""Routes of the whole server, and pieces two dialects' routes share: `metrics` (/metrics),
`admin_live` (the launcher's live view), `pages` (the chat page), `sleep_wake`
(--sleep-idle-seconds), `slot_actions` (/slots), `router_models` (llama-server's router
states), `lora` (llama-server's LoRA routes and fields) and `llama_extensions` (llama-server's
figures, also on its OpenAI answers).

May import: the shared packages here, the core, FastAPI, pydantic.
"""
