"""JSON reporter: the machine contract of `analyze --format json` (see README)."""

from __future__ import annotations

import json
from typing import ClassVar

from traceview.analyzer.analysis import Analysis
from traceview.app.reporters.base import ReportOptions, json_safe, provenance, report_data


class JSONReporter:
    name: ClassVar[str] = "json"
    file_extension: ClassVar[str] = ".json"

    def render(self, analysis: Analysis, options: ReportOptions) -> str:
        data = report_data(analysis, options)
        data["provenance"] = provenance(analysis, options)
        # NaN and infinity have no JSON spelling: every one, wherever it comes from, is null.
        return json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"
