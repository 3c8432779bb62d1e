"""A saved `traceview fleet --format json` result, opened again (in the dashboard, or by `analyze`): the record it holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceview.errors import TraceFormatError
from traceview.parsers.base import Format, Head, Parsed, ReadOptions


def _sniff(head: Head) -> bool:
    text = head.text.lstrip()
    return head.is_text and text.startswith("{") and '"fleet"' in text


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    try:
        record: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TraceFormatError(path, f"a fleet result that is not valid JSON ({error})", "save it again with traceview fleet --format json -o fleet.json") from None
    if not (isinstance(record, dict) and isinstance(record.get("fleet"), dict) and "ranks" in record["fleet"]):
        raise TraceFormatError(path, "a JSON file with a \"fleet\" key but no fleet result in it", "save it again with traceview fleet --format json -o fleet.json")
    return Parsed(record, "traceview fleet")


FORMATS = (Format("traceview-fleet", "fleet", _read, _sniff, order=5, whole=True),)
