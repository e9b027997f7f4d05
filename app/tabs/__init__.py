"""The launcher's settings tabs."""
