"""Hearth's desktop launcher (PySide6). It lands with the launcher issue; until then `hearth`
always serves headless."""
