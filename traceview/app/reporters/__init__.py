"""Reporters: Analysis → text in one output format, behind one small interface (base.Reporter)."""

from __future__ import annotations

from traceview.app.reporters.base import Reporter, ReportOptions
from traceview.app.reporters.html_report import HTMLReporter
from traceview.app.reporters.json_report import JSONReporter
from traceview.app.reporters.markdown_report import MarkdownReporter
from traceview.app.reporters.terminal import TerminalReporter

REPORTERS: dict[str, type[Reporter]] = {r.name: r for r in (TerminalReporter, JSONReporter, MarkdownReporter, HTMLReporter)}

__all__ = ["REPORTERS", "ReportOptions", "Reporter"]
