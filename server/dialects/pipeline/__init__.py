"""A request from route to answer, written once for every dialect: `routing`
(`generation_route`, `json_route`: key, body, model), `model_choice` and `model_files` (the
model a request names, the models listed), `admission` (its queue place, or the 503),
`preparing` (media scaled after planning), `serving` (one job answered whole or streamed),
`choices` (OpenAI's `n`) and `openapi` (bodies in /openapi.json).

May import: the other shared packages here, the core, FastAPI, pydantic.
"""
