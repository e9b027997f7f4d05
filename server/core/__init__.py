"""The core: one request type, the scheduler and the engine. No HTTP, no pydantic here."""
