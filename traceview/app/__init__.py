"""Presentation: CLI, reporters, dashboard. May import analyzer and parsers."""
