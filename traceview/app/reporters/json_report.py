"""JSON reporter: a report's machine record (the `--format json` contract, docs/json.md) with its provenance."""

from __future__ import annotations

import json
from typing import ClassVar

from traceview.app.document import Report
from traceview.app.reporters.base import ReportOptions, json_safe


class JSONReporter:
    name: ClassVar[str] = "json"
    file_extension: ClassVar[str] = ".json"
    brief: ClassVar[bool] = False

    def render(self, report: Report, options: ReportOptions) -> str:
        data = dict(report.record)
        if report.provenance:
            data["provenance"] = report.provenance
        # NaN and infinity have no JSON spelling: every one, wherever it comes from, is null.
        return json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"
