"""What every route does before its own work: `errors` (each dialect's error shape, the body
parsed with its size and depth limits), `generation_defaults` (--gendefaults filled into a
body), `sampling` (request fields marked as sampling parameters), `limits` (the bounds every
schema shares), `deps` (typed app state), and guarding a shared server: `api_keys` (the key
ring), `client_address` (who asked, through --trustedproxies), `rate_limit`, `cors`.

May import: the core, `server.settings`, `server.base`, FastAPI, pydantic.
"""
