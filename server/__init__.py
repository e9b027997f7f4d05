"""Hearth's embedded server: one local model, every streaming dialect, KoboldCpp's queue.

Layers, each importing only those below it (`make lint` checks it): `process` > `dialects` >
`core` > `models` | `devices` > `settings` > `base`. See docs/ARCHITECTURE.md.
"""

__version__ = "0.1.0"
