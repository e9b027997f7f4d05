"""Hearth's embedded server: one local model, every streaming dialect, KoboldCpp's queue."""

__version__ = "0.1.0"
