"""Nsight Compute console output (what `ncu ./app` prints without --csv) → one row per kernel launch (schema.KERNELS).

The grammar, from `docs/formats.md` §1.8 and the captures in `realdata/ncu_console/`:

- `==PROF==`/`==WARNING==`/`==ERROR==` lines and application output anywhere before the results; `[PID] process@host`
  opens each process's results.
- A kernel line per launch: 2022+ `name(args) (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC X.Y`;
  2019-2022 `name(args), 2022-Dec-04 20:05:21, Context N, Stream N`. Names hold `, ` inside template arguments, so the
  line is matched from its end.
- `Section: <display name>` blocks. A metric table sits between dashed rules whose dash groups give the column spans
  (name, unit, value); newer versions add a `Metric Name  Metric Unit  Metric Value` header between two rules. Pastes
  in tickets and notes often lose the rules: where the whole text has none, a section's rows are read by their spacing
  (name, unit, value apart by two or more spaces), and only rows whose value is a number.
- Rule results: `OPT`/`INF`/`WRN`/`ERR` at the start of the text column, continuation lines indented to it, an optional
  `Est. [Local|Global] Speedup: 23.4%` first, and `----- -----` between consecutive results.
- A launch that failed under profiling prints `(!) nan` / `(!) n/a` values.

The console shows no rule identifiers; the common ones are recognised from their text (`name` stays null otherwise).
The launch ID is the launch's position in the output, counting from 0 as ncu does.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from traceview.errors import TraceFormatError
from traceview.numbers import float_or_none
from traceview.parsers.base import SNIFF_BYTES, Format, Head, Parsed, ReadOptions, cut_notes
from traceview.parsers.ncu_csv import DECIMAL_COMMA_NOTE, _assemble, rule_frame

_KERNEL_2022 = re.compile(
    r"^\s*(?P<name>\S.*?) \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\), Context (?P<context>\d{1,18}), Stream (?P<stream>\d{1,18})"
    r"(?:, Device (?P<device>\d{1,18}), CC (?P<cc>\d+\.\d+))?\s*$"
)
_KERNEL_OLD = re.compile(
    r"^\s*(?P<name>\S.*?), (?P<time>\d{4}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2}), Context (?P<context>\d{1,18}), Stream (?P<stream>\d{1,18})\s*$"
)
PROCESS_LINE = re.compile(r"^\s*\[(?P<pid>\d{1,18})\] (?P<process>.+)@(?P<host>\S+)\s*$")
# Any indentation, none included: consoles pasted from web pages and chat lose their leading spaces.
# `Section: NAME` heads each section; with `--print-details body` (2025+) each body table has its own heading instead,
# `Table Name : NAME` (and a `Table Description : ...` line).
SECTION_LINE = re.compile(r"^\s*(?:Section:|Table Name :)\s*(?P<section>.+?)\s*$")
_RULE_LINE = re.compile(r"^(?P<indent>\s*)(?P<type>OPT|INF|WRN|ERR)(?P<gap>\s+)(?P<text>\S(?:.*\S)?)\s*$")
_RULE_SEPARATOR = re.compile(r"^\s*-{5} -{5,}\s*$")
_DASHES = re.compile(r"^\s*-{3,}( +-{3,})+\s*$")
# `Est. Speedup: 29.84%` (2023.2+, `Est. Local Speedup:` too), `Estimated Speedup: 5.314%` (2023.1); tiny estimates
# are printed in exponent form (`1.193e-05%`).
_SPEEDUP = re.compile(r"^Est(?:\.|imated) (?:(?P<kind>Local|Global) )?Speedup: (?P<pct>[0-9.,]+(?:[eE][-+]?[0-9]+)?)%\s*")
_HEADER = re.compile(r"^\s*Metric Name\s+Metric Unit\s+Metric Value\s*$")
_LOG_LINE = re.compile(r"^==[A-Z]+==")
# A value as the console prints it: grouped digits, a decimal point or comma, an exponent, ncu's `(!)` marker, or n/a.
_VALUE = re.compile(r"^(?:\(!\)\s*)?(?:-?[0-9][0-9,. \u00a0\u202f]*(?:[eE][-+]?[0-9]+)?|n/a|nan|inf)$", re.IGNORECASE)
RULES_STRIPPED_NOTE = "the metric tables have no dashed rules (a trimmed paste): rows were read by their spacing"

# Section display names (console) → identifiers (CSV `Section Name` of rule rows), from `ncu --list-sections`.
SECTION_IDS = {
    "GPU Speed Of Light Throughput": "SpeedOfLight",
    "GPU Speed Of Light": "SpeedOfLight",
    "GPU Speed Of Light Roofline Chart": "SpeedOfLight_RooflineChart",
    "Compute Workload Analysis": "ComputeWorkloadAnalysis",
    "Instruction Statistics": "InstructionStats",
    "Launch Statistics": "LaunchStats",
    "Memory Workload Analysis": "MemoryWorkloadAnalysis",
    "Memory Workload Analysis Chart": "MemoryWorkloadAnalysis_Chart",
    "Memory Workload Analysis Tables": "MemoryWorkloadAnalysis_Tables",
    "Occupancy": "Occupancy",
    "PM Sampling": "PmSampling",
    "Scheduler Statistics": "SchedulerStats",
    "Source Counters": "SourceCounters",
    "Warp State Statistics": "WarpStateStats",
    "GPU and Memory Workload Distribution": "WorkloadDistribution",
    "NVLink": "Nvlink",
}

# Rule identifiers recognised from the opening words of their text (the console prints none).
_RULE_NAMES = (
    ("SOLBottleneck", (r"low compute throughput and memory bandwidth|grid is too small to fill|more heavily utilized than|"
                      r"utilizing greater than [0-9.]+% of the available compute or memory")),
    ("SOLFPRoofline", r"ratio of peak float"),
    ("TheoreticalOccupancy", r"theoretical occupancy \([0-9.]+%\) is limited|theoretical warps per scheduler"),
    ("AchievedOccupancy", r"difference between calculated theoretical"),
    ("LaunchConfiguration", r"A wave of thread blocks is defined|partial wave"),
    ("IssueSlotUtilization", r"Every scheduler is capable of issuing"),
    ("CPIStall", r"each warp of this (?:kernel|workload) spends"),
    ("HighPipeUtilization", r"is the highest-utilized pipeline"),
    ("UncoalescedGlobalAccess", r"uncoalesced global accesses"),
    ("UncoalescedSharedAccess", r"uncoalesced shared accesses"),
    ("MemoryCacheAccessPattern", r"memory access pattern for (?:global|shared|local)"),
    ("WarpStallSampling", r"Warp Stall Sampling"),
)

_CONSOLE_HINT = "pass the text exactly as `ncu` printed it (or export CSV: ncu -i report.ncu-rep --csv --page details)"


def looks_like_console(text: str) -> bool:
    """True when the text holds an ncu kernel line followed by a `Section:` block."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if ", Context " in line and (_KERNEL_2022.match(line) or _KERNEL_OLD.match(line)):
            return any(SECTION_LINE.match(following) for following in lines[index + 1:index + 8])
    return False


def _rule_name(text: str) -> str | None:
    for name, pattern in _RULE_NAMES:
        if re.search(pattern, text):
            return name
    return None


def table_columns(rule_line: str) -> list[tuple[int, int]]:
    """Return the (start, end) columns of each dash group of a table rule."""
    return [(m.start(), m.end()) for m in re.finditer(r"-{3,}", rule_line)]


def row_columns(line: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the table's columns for one row. Names start at the table's left edge; some 2022 versions print the rows
    two columns right of the dashed rules (units and values end two past their rules), and the columns move with them."""
    shift = len(line) - len(line.lstrip()) - spans[0][0] if spans else 0
    return [(start + shift, end + shift) for start, end in spans] if shift > 0 else spans


def _cells(line: str, spans: list[tuple[int, int]]) -> tuple[str, str, str] | None:
    """Return (name, unit, value) of a metric row: the unit and value from their columns, the name before them."""
    spans = row_columns(line, spans)
    if len(spans) >= 3:
        name = line[:spans[1][0]].strip()
        unit = line[spans[1][0]:spans[1][1]].strip()
        value = line[spans[2][0]:].strip()
        if name:
            return name, unit, value
    parts = re.split(r"\s{2,}", line.strip())
    if len(parts) >= 3:
        return " ".join(parts[:-2]), parts[-2], parts[-1]
    if len(parts) == 2:
        return parts[0], "", parts[1]
    return None


def _bare_row(line: str) -> tuple[str, str, str] | None:
    """Return (name, unit, value) of a metric row printed without its table's rules, or None unless the line is a
    name and a number (with a unit between) apart by two or more spaces."""
    parts = re.split(r"\s{2,}", line.strip())
    if len(parts) not in (2, 3) or not (parts[0][:1].isalpha() or parts[0].startswith("# ")) or not _VALUE.match(parts[-1]):
        return None
    return parts[0], parts[1] if len(parts) == 3 else "", parts[-1]


def clean_value(value: str, decimal_comma: bool) -> str:
    """Return the number text with `(!)` markers and locale grouping spaces removed, in '.'-decimal form."""
    value = value.replace("(!)", "").strip()
    if re.fullmatch(r"-?\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:[.,]\d+)?", value):
        value = re.sub(r"[ \u00a0\u202f]", "", value)
    if decimal_comma:
        # Where the comma is the decimal mark a dot can only group thousands (`13.490.336`, `9.420.231,80`).
        if re.fullmatch(r"-?\d{1,3}(?:\.\d{3})+(?:,\d+)?", value):
            value = value.replace(".", "")
        if re.fullmatch(r"-?\d+,\d+", value):
            value = value.replace(",", ".")
    return value


def lines_use_decimal_comma(lines: list[str]) -> bool:
    """True when numbers are written with a decimal comma (a locale that groups thousands with spaces or dots)."""
    return any(re.search(r"\s\d+,\d{1,2}\s*$|\s\d{1,3}(?:[ .]\d{3})+,\d+\s*$", line) for line in lines if not _LOG_LINE.match(line))


def parse(path: str | Path, notes: list[str] | None = None) -> pl.DataFrame:
    """Return one row per kernel launch in the console output, in the KERNELS schema (durations in ns, bytes, Hz)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [line.rstrip("\r") for line in text.split("\n")]
    decimal_comma = lines_use_decimal_comma(lines)
    rules_stripped = not any(_DASHES.match(line) and not _RULE_SEPARATOR.match(line) for line in lines)
    read_by_spacing = False
    identity: list[dict[str, object]] = []
    metrics: list[dict[str, str]] = []
    rules: list[dict[str, object]] = []
    process: dict[str, object] = {}
    launch: int | None = None
    section: str | None = None
    spans: list[tuple[int, int]] = []
    in_table = False
    rows = 0
    rule: dict[str, object] | None = None
    rule_lines: list[str] = []  # the open rule's text, one entry per printed line
    text_column = 0

    def close_rule() -> None:
        nonlocal rule
        if rule is not None:
            message = " ".join(rule_lines)
            match = _SPEEDUP.match(message)
            if match and float_or_none(match.group("pct")) is not None:
                rule["speedup_pct"] = float_or_none(match.group("pct"))
                rule["speedup_type"] = (match.group("kind") or "global").lower()
                message = message[match.end():].strip()
            rule["message"] = message
            rule["name"] = _rule_name(message)
            rules.append(rule)
            rule = None

    for line in lines:
        if _LOG_LINE.match(line) or line.strip().startswith("```"):
            close_rule()
            continue
        kernel = _KERNEL_2022.match(line) or _KERNEL_OLD.match(line) if ", Context " in line else None
        if kernel:
            close_rule()
            launch = len(identity)
            groups = kernel.groupdict()
            identity.append({
                "launch_id": str(launch),
                "process_id": process.get("pid"), "process_name": process.get("process"), "host_name": process.get("host"),
                "kernel_name": groups["name"].strip(), "context_id": groups["context"], "stream_id": groups["stream"],
                "grid_size": f"({groups['grid']})" if groups.get("grid") else None,
                "block_size": f"({groups['block']})" if groups.get("block") else None,
                "device_index": groups.get("device"), "compute_capability": groups.get("cc"),
            })
            section, in_table, spans = None, False, []
            continue
        owner = PROCESS_LINE.match(line)
        if owner and not in_table:
            close_rule()
            process = owner.groupdict()
            continue
        if launch is None:
            continue
        heading = SECTION_LINE.match(line)
        if heading:
            close_rule()
            section, in_table, spans = heading.group("section"), False, []
            continue
        if section is None:
            continue
        if _DASHES.match(line) and not _RULE_SEPARATOR.match(line):
            close_rule()
            # A rule opens a table; the one under a header row keeps it open; one after data rows closes it.
            if not in_table:
                in_table, spans, rows = True, table_columns(line), 0
            elif rows:
                in_table = False
            continue
        if in_table:
            # A line less indented than the table's rules is the application's own output, interleaved with ncu's.
            if spans and line.strip() and len(line) - len(line.lstrip()) < spans[0][0]:
                continue
            if _HEADER.match(line):
                continue
            if not line.strip():
                in_table = False
                continue
            cells = _cells(line, spans)
            if cells:
                name, unit, value = cells
                metrics.append({"launch_id": str(launch), "metric": name, "unit": unit, "value": clean_value(value, decimal_comma)})
                rows += 1
            continue
        if _RULE_SEPARATOR.match(line):
            close_rule()
            continue
        start = _RULE_LINE.match(line)
        if start:
            close_rule()
            # A rule at column 0 was pasted without indentation: its continuation lines lost theirs too.
            text_column = len(start.group("indent")) + 3 + len(start.group("gap")) if start.group("indent") else 0
            rule = {"launch_id": str(launch), "section": SECTION_IDS.get(section, section.replace(" ", "")), "type": start.group("type"),
                    "speedup_type": None, "speedup_pct": None}
            rule_lines = [start.group("text")]
            continue
        if rule is not None and line.strip() and len(line) - len(line.lstrip()) >= text_column - 1:
            rule_lines.append(line.strip())
            continue
        close_rule()
        cells = _bare_row(line) if rules_stripped else None
        if cells:
            name, unit, value = cells
            metrics.append({"launch_id": str(launch), "metric": name, "unit": unit, "value": clean_value(value, decimal_comma)})
            read_by_spacing = True
    close_rule()

    if not identity:
        raise TraceFormatError(path, "no kernel lines (`name (grid)x(block), Context N, Stream N, …`) were found in this Nsight Compute output",
                               _CONSOLE_HINT)
    if not metrics and not rules:
        raise TraceFormatError(path, f"{len(identity)} kernel line(s) but no metric tables under them: the output looks cut or filtered",
                               _CONSOLE_HINT)
    # A section made only of rule results (`--section MemoryWorkloadAnalysis_Tables` prints no table in the console)
    # still names the kernel and ncu's estimated speedups: read, with no metrics (the analysis says what is missing).
    if decimal_comma and notes is not None:
        notes.append(DECIMAL_COMMA_NOTE)
    if read_by_spacing and notes is not None:
        notes.append(RULES_STRIPPED_NOTE)
    long = pl.DataFrame(metrics, schema={"launch_id": pl.String, "metric": pl.String, "unit": pl.String, "value": pl.String})
    frame_identity = pl.DataFrame(identity, schema={key: pl.String for key in identity[0]})
    rules_by_launch = rule_frame(rules)
    if frame_identity["process_id"].null_count() == frame_identity.height:
        # The `[PID] process@host` line was cut from the paste: launches are keyed by their ID alone.
        frame_identity = frame_identity.drop("process_id", "process_name", "host_name")
        return _assemble(long, frame_identity, rules_by_launch, notes)
    # Launches are keyed by (launch_id, process_id), as in the CSV; a launch before any `[PID]` line has process "".
    frame_identity = frame_identity.with_columns(pl.col("process_id").fill_null(""))
    owners = frame_identity.select("launch_id", "process_id")
    long = long.join(owners, on="launch_id", how="left")
    if rules_by_launch is not None:
        rules_by_launch = rules_by_launch.join(owners, on="launch_id", how="left")
    return _assemble(long, frame_identity, rules_by_launch, notes)


def profiler_hint(path: str | Path) -> str:
    """Return which Nsight Compute generation printed this output, from its kernel line and table layout."""
    with Path(path).open("rb") as handle:
        head = handle.read(1 << 20).decode("utf-8", errors="replace")
    if re.search(r"\)x\(\d+, \d+, \d+\), Context \d+, Stream \d+, Device \d+, CC", head):
        era = "2023 or newer" if "Est. " in head or "Metric Name" in head else "2022 or newer"
    else:
        era = "2019-2022"
    return f"Nsight Compute {era}, console output"


def _read(path: Path, found: object, options: ReadOptions) -> Parsed:
    notes = cut_notes(options)
    kernels = parse(path, notes)
    return Parsed(kernels, profiler_hint(path), tuple(notes))


FORMATS = (
    Format("ncu-console", "kernels", _read, lambda head: head.is_text and looks_like_console(head.text), order=30,
           late_sniff=lambda head: console_further_in(head) == "ncu-console", data_line=re.compile(r"\S"), joinable=True),
)


# ncu prints one `==PROF== Profiling …` line per launch before any result: with thousands of launches the first kernel
# block comes megabytes in.
_CONSOLE_SNIFF_BYTES = 16 * 1024 * 1024


def console_further_in(head: Head) -> str | None:
    """Return the console format (`ncu-console` or `ncu-console-summary`) when Nsight Compute console results start
    after the first 64 KB (a long `==PROF==` preamble), else None; looked at once per file."""

    def find() -> str | None:
        if not head.is_text or "==PROF==" not in head.text:
            return None
        with head.path.open("rb") as handle:
            text = handle.read(_CONSOLE_SNIFF_BYTES).decode("utf-8", errors="replace")
        start = max(0, text.rfind("==PROF==") - 1)
        results = text[start:start + SNIFF_BYTES * 4]
        if looks_like_console(results):
            return "ncu-console"
        from traceview.parsers.ncu_summary import looks_like_summary_console  # ncu_summary builds on this module

        return "ncu-console-summary" if looks_like_summary_console(results) else None

    found: str | None = head.once("ncu_console_further_in", find)
    return found
