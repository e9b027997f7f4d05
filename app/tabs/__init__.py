"""The launcher's settings tabs: every setting bound once (`settings_table`, `bindings`),
placed in rows (`settings_tabs`) and loaded and read generically (`form`); the GPU fields
(`gpu_fields`) take part as one piece. Imports as `app` does."""
