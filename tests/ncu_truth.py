"""Independent reading of ncu CSV files with the standard csv module, to check the parser against."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    rows = list(csv.reader(lines[start:]))
    return rows[0], [r for r in rows[1:] if r and not r[0].startswith("==")]


def details_truth(path: Path) -> dict:
    """Launch count, launches per kernel name and duration per launch (ns) from a details page."""
    header, rows = read_rows(path)
    ids, names, durations = {}, Counter(), {}
    col = {name: header.index(name) for name in header}
    for row in rows:
        launch = row[col["ID"]]
        if not launch:
            continue
        if launch not in ids:
            ids[launch] = row[col["Kernel Name"]]
            names[row[col["Kernel Name"]]] += 1
        if len(row) > col["Metric Value"] and row[col["Metric Name"]] == "Duration":
            unit = row[col["Metric Unit"]]
            value = float(row[col["Metric Value"]].replace(",", ""))
            durations[launch] = value * {"nsecond": 1, "us": 1e3, "usecond": 1e3, "msecond": 1e6}[unit]
    return {"launches": len(ids), "names": names, "durations": durations}


def raw_truth(path: Path) -> dict:
    header, rows = read_rows(path)
    units, data = rows[0], rows[1:]
    d = header.index("gpu__time_duration.sum")
    assert units[d] == "ns"
    return {
        "launches": len(data),
        "names": Counter(r[header.index("Kernel Name")] for r in data),
        "durations": {r[0]: float(r[d].replace(",", "")) for r in data},
    }
