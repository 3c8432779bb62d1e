"""The Plotly Dash dashboard behind `traceview serve`: roofline, ranked bottlenecks, details, uploads and compare.

Figures come from app/figures.py (shared with the HTML report); callbacks only select data and call those functions.
Kernel names are untrusted text: the table and the detail panel render them as text, and figures escape them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import secrets
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dash
import dash_ag_grid as dag
import flask
import plotly.graph_objects as go
import werkzeug.exceptions
from dash import Input, Output, State, dcc, html

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.diff import compare
from traceview.app.document import Bullets, Document, FigureRef, Heading, Paragraph, Table, plain
from traceview.app.figures import (
    telemetry_figure,
    timeline_figure,
)
from traceview.app.formatting import format_change, format_duration, format_pct, format_rate, gap_calls_text
from traceview.app.reporters.base import (
    diagnosis_lines,
    kernel_records,
)
from traceview.app.reporters.diff_report import diff_data
from traceview.app.views import view_for
from traceview.app.views.projection import projection_blocks
from traceview.errors import TraceFormatError, TraceviewError
from traceview.wording import counted

DEFAULT_MAX_UPLOAD_MB = 512
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
TABLE_COLUMNS = [
    ("rank", "#"), ("short_name", "kernel"), ("launches", "launches"), ("time_ms", "time (ms)"), ("share_pct", "share %"),
    ("bound", "verdict"), ("label", "label"), ("arithmetic_intensity", "AI (FLOP/B)"), ("roof_pct", "% of roof"),
    ("recoverable_ms", "recoverable (ms)"),
]
_BOUND_CELL = {"styleConditions": [{"condition": f"params.value == '{bound}'", "style": {"color": colour}}
                                   for bound, colour in (("memory", "#1f77b4"), ("compute", "#d62728"), ("latency", "#ff7f0e"))]}
# The grid: sorting, filtering and resizing on every column; long kernel names wrap no further than the cell and show
# whole on hover (the full name is in the detail panel).
KERNEL_GRID_COLUMNS = [
    {"field": key, "headerName": title, **({"tooltipField": "id", "minWidth": 220, "flex": 3} if key == "short_name" else {}),
     **({"cellStyle": _BOUND_CELL} if key == "bound" else {}),
     **({"type": "numericColumn", "filter": "agNumberColumnFilter"} if key not in ("short_name", "bound", "label") else {})}
    for key, title in TABLE_COLUMNS
]


SESSION_COOKIE = "traceview_session"
UPLOADS_PER_SESSION = 8
SESSIONS = 64
SESSION_IDLE_S = 24 * 3600


class RunStore:
    """The analyses this server holds: the runs it was started with, shared by every browser and never evicted, and
    each browser session's uploads (at most UPLOADS_PER_SESSION, oldest dropped first; the SESSIONS most recently
    active sessions are kept, and a session idle for SESSION_IDLE_S loses its uploads), so one client's uploads can
    neither evict nor be seen by another's, and a long-running server does not keep forgotten uploads."""

    def __init__(self, uploads_per_session: int = UPLOADS_PER_SESSION, sessions: int = SESSIONS, idle_s: float = SESSION_IDLE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._shared: OrderedDict[str, Analysis] = OrderedDict()
        self._sessions: OrderedDict[str, OrderedDict[str, Analysis]] = OrderedDict()
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()
        self.uploads_per_session = uploads_per_session
        self.sessions = sessions
        self.idle_s, self.clock = idle_s, clock

    def _touch(self, session: str | None) -> None:
        """Drop the sessions idle too long, then mark this one active (call with the lock held)."""
        now = self.clock()
        for stale in [s for s, seen in self._seen.items() if now - seen > self.idle_s]:
            self._sessions.pop(stale, None)
            del self._seen[stale]
        if session:
            self._seen[session] = now

    def add(self, analysis: Analysis, name: str, session: str | None = None) -> str:
        """Add a run (shared without a session, else that session's upload); return its unique label."""
        with self._lock:
            self._touch(session)
            own = self._sessions.setdefault(session, OrderedDict()) if session else self._shared
            taken = set(self._shared) | set(own)
            label, n = name, 2
            while label in taken:
                label, n = f"{name} ({n})", n + 1
            if session:
                self._sessions.move_to_end(session)
                while len(own) >= self.uploads_per_session:
                    own.popitem(last=False)
                while len(self._sessions) > self.sessions:
                    dropped, _ = self._sessions.popitem(last=False)
                    self._seen.pop(dropped, None)
            own[label] = analysis
            return label

    def get(self, label: str | None, session: str | None = None) -> Analysis | None:
        with self._lock:
            self._touch(session if session in self._sessions else None)
            own: OrderedDict[str, Analysis] | dict[str, Analysis] = self._sessions.get(session or "", {})
            return own.get(label or "") or self._shared.get(label or "")

    def labels(self, session: str | None = None) -> list[str]:
        with self._lock:
            self._touch(session if session in self._sessions else None)
            return list(self._shared) + list(self._sessions.get(session or "", {}))


def _round(value: Any, digits: int = 2) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def table_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """Rows for the ranked table: one per kernel, times in ms, the full name kept as the row id."""
    rows = []
    for k in kernel_records(analysis):
        rows.append({
            "id": k["name"], "rank": k["rank"], "short_name": k["short_name"], "launches": k["launches"],
            "time_ms": _round(k["duration_ns"] / 1e6, 4) if k["duration_ns"] is not None else None,
            "share_pct": _round(k["share_pct"]), "bound": k["bound"], "label": k["label"],
            "arithmetic_intensity": _round(k["arithmetic_intensity"], 3), "roof_pct": _round(k["roof_pct"]),
            "recoverable_ms": _round(k["recoverable_ns"] / 1e6, 4) if k["recoverable_ns"] is not None else None,
        })
    return rows


def detail_panel(analysis: Analysis, kernel_name: str | None) -> list[Any]:
    """Return the detail panel for one kernel: full name, every metric, why the verdict, what to do."""
    record = next((k for k in kernel_records(analysis) if k["name"] == kernel_name), None)
    if record is None:
        return [html.P("Select a kernel in the table to see its details.", className="hint")]
    # The diagnosis is shown as sentences, not as the nested data the JSON carries.
    shown_as_text = {"name", "reason", "recommendation", "rules", "occupancy", "stalls", "advice"}
    metrics = [html.Tr([html.Th(key.replace("_", " ")), html.Td(_metric_text(key, value))])
               for key, value in record.items() if key not in shown_as_text and value is not None and not isinstance(value, (list, dict))]
    evidence = [line for line in diagnosis_lines(record) if not line.startswith("Do: ")]
    return [
        html.H3(record["short_name"]),
        html.Code(record["name"], id="detail-name", style={"whiteSpace": "pre-wrap", "wordBreak": "break-all"}),
        html.H4("Why"), html.P(record["reason"], id="detail-reason"),
        *([html.Ul([html.Li(line) for line in evidence], id="detail-evidence")] if evidence else []),
        html.H4("What to do"), html.Ul([html.Li(line) for line in (record.get("advice") or [record["recommendation"]])], id="detail-advice"),
        html.H4("All metrics"), html.Table(metrics, className="metrics"),
    ]


def side_panel(analysis: Analysis) -> list[Any]:
    """Return what the input has besides kernels (its view's side document): timeline findings, telemetry findings,
    llama.cpp runs, or a fleet's stragglers, per-rank breakdown and failed files."""
    side = view_for(analysis).side(analysis)
    return dash_blocks(dataclasses.replace(side, blocks=(*side.blocks, *projection_blocks(analysis))))


def _grid_value(text: str, numeric: bool) -> Any:
    if numeric:
        try:
            return float(text.replace(",", ""))
        except ValueError:
            return text
    return text


def dash_blocks(document: Document) -> list[Any]:
    """A document as Dash components: headings, paragraphs (strong ones as verdicts), lists, sortable grids, graphs,
    and the notes last."""
    parts: list[Any] = []
    for index, block in enumerate(document.blocks):
        if isinstance(block, Heading):
            parts.append(html.H3(block.text))
        elif isinstance(block, Paragraph):
            parts.append(html.P(plain(block.spans), className="verdict" if any(s.style == "strong" for s in block.spans) else None))
        elif isinstance(block, Bullets):
            parts.append(html.Ul([html.Li(plain(item.spans), style={"marginLeft": f"{item.depth}rem"} if item.depth else None) for item in block.items]))
        elif isinstance(block, Table):
            fields = [f"c{i}" for i in range(len(block.columns))]
            parts.append(dag.AgGrid(
                id=f"side-table-{index}",
                columnDefs=[{"field": f, "headerName": c.title, **({"type": "numericColumn"} if c.unit == "number" else {})}
                            for f, c in zip(fields, block.columns, strict=True)],
                rowData=[{f: _grid_value(plain(cell), c.unit == "number") for f, c, cell in zip(fields, block.columns, row, strict=True)} for row in block.rows],
                defaultColDef={"sortable": True, "filter": True, "resizable": True, "minWidth": 80},
                columnSize="autoSize", style={"height": "320px"},  # a narrow side column scrolls sideways instead of squeezing
            ))
        elif isinstance(block, FigureRef):
            parts.append(dcc.Graph(id=block.key, figure=block.build(), config={"displaylogo": False}))
    parts += [html.P(f"Note: {note}", className="hint") for note in document.notes]
    return parts


def _metric_text(key: str, value: Any) -> str:
    """A metric as a person reads it: durations in µs/ms/s, rates with SI prefixes, percentages, counts with separators."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith("_ns"):
        return format_duration(float(value))
    if key.endswith("_pct"):
        return format_pct(float(value))
    if key.endswith("flop_per_s"):
        return format_rate(float(value), "FLOP/s")
    if key.endswith("bytes_per_s"):
        return format_rate(float(value), "B/s")
    if key.endswith("bytes"):
        return format_rate(float(value), "B")
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def summary_line(analysis: Analysis) -> str:
    """The run's one-line summary above the figures (its view's)."""
    return view_for(analysis).summary(analysis)


def compare_panel(before: Analysis | None, after: Analysis | None) -> list[Any]:
    """Return the side-by-side comparison of two loaded runs (the analyzer's diff, rendered as a table)."""
    if before is None or after is None:
        return [html.P("Load two runs (upload another export) and pick them above to compare.", className="hint")]
    try:
        data = diff_data(compare(before, after))
    except TraceviewError as error:
        return [html.P(str(error), className="error")]
    parts: list[Any] = [html.P(w, className="warning") for w in data["warnings"]]
    if data["kind"] == "kernels":
        total = data["total"]
        parts.append(html.P(f"Total GPU time {format_duration(total['before_ns'])} → {format_duration(total['after_ns'])} "
                            f"({format_pct(total['change_pct'])})"))
        rows = [{"kernel": k["short_name"], "status": k["status"], "before (ms)": _round((k["before_ns"] or 0) / 1e6, 4),
                 "after (ms)": _round((k["after_ns"] or 0) / 1e6, 4), "change %": _round(k["change_pct"]),
                 "verdict": f"{k['bound_before'] or '—'} → {k['bound_after'] or '—'}"} for k in data["kernels"]]
    elif data["kind"] == "llama":
        rows = [{"test": r["test"], "before (tokens/s)": _round(r["tokens_per_s"]), "after (tokens/s)": _round(r["tokens_per_s_after"]),
                 "change %": _round(r["change_pct"])} for r in data["runs"]]
    else:
        rows = [{"": name, "before": _round(v["before"]), "after": _round(v["after"]), "change": format_change(v)}
                for name, v in data["telemetry"].items()]
    if rows:
        parts.append(dag.AgGrid(id="compare-table", columnDefs=[{"field": c} for c in rows[0]], rowData=rows,
                                defaultColDef={"sortable": True, "filter": True, "resizable": True}, columnSize="responsiveSizeToFit",
                                style={"height": "420px"}))
    parts += [html.P(finding) for finding in data["findings"]]
    return parts


def _window(relayout: dict[str, Any] | None) -> tuple[float, float] | None:
    """Return the zoomed x window (ms from the run's first activity, as the axis shows it), or None for a reset or
    another change (a y-only zoom, a legend click)."""
    if not relayout or relayout.get("xaxis.autorange"):
        return None
    try:
        low, high = float(relayout["xaxis.range[0]"]), float(relayout["xaxis.range[1]"])
    except (KeyError, TypeError, ValueError):
        return None
    return (low, high) if high > low else None


def gap_detail(analysis: Analysis, index: str) -> list[Any]:
    """Return what the host did during one listed idle gap: its cause and the evidence behind it."""
    gaps = analysis.timeline.gaps if analysis.timeline is not None else []
    if not index.isdigit() or int(index) >= len(gaps):
        return []
    gap = gaps[int(index)]
    evidence = gap.get("evidence") or {}
    ranges = [r for r in (evidence.get("nvtx_outermost"), evidence.get("nvtx_innermost")) if r]
    calls = gap_calls_text(evidence.get("cuda_calls", []))
    return [html.H4(f"Idle gap on GPU {gap['device_id']}: {format_duration(gap['duration_ns'])}"),
            html.P(f"Cause: {gap['cause']} — {gap['cause_text']}", id="gap-cause"),
            *([html.P("NVTX: " + " > ".join(r["name"][:80] for r in ranges))] if ranges else []),
            *([html.P(f"CUDA calls in it: {calls}")] if calls else [])]


class _Memo:
    """What callbacks rebuild for every client (figures, table rows, panels) kept per analysis: under load the same
    run is drawn again and again, and an analysis never changes. Entries hold their analysis, so an evicted upload's
    recycled id() can never return another run's figure; the oldest entries go first."""

    def __init__(self, size: int = 256) -> None:
        self.size, self.entries, self.lock = size, {}, threading.Lock()  # type: ignore[var-annotated]

    def get(self, analysis: Analysis, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        full = (id(analysis), *key)
        with self.lock:
            entry = self.entries.get(full)
            if entry is not None and entry[0] is analysis:
                return entry[1]
        value = build()
        with self.lock:
            self.entries[full] = (analysis, value)
            while len(self.entries) > self.size:
                self.entries.pop(next(iter(self.entries)))
        return value


_MEMO = _Memo()


def event_detail(analysis: Analysis, label: str) -> list[Any]:
    """Return what the run says about a clicked timeline event: for a kernel, its totals, verdict and advice."""
    record = next((k for k in kernel_records(analysis) if k["name"] == label), None)
    if record is None:
        return [html.P(f"Event: {label}", id="timeline-event")]
    return [html.H4(record["short_name"], id="timeline-event"), html.Code(record["name"], style={"whiteSpace": "pre-wrap", "wordBreak": "break-all"}),
            html.P(f"{counted(record['launches'], 'launch', 'launches')}, {format_duration(record['duration_ns'])} in all "
                   f"({format_pct(record['share_pct'])} of GPU time); median {format_duration(record['median_duration_ns'])}"),
            html.P(record["reason"] or ""), html.P(f"What to do: {record['recommendation'] or ''}")]


def figure_for(analysis: Analysis, highlight: str | None, per_launch: bool) -> go.Figure:
    """Return the main figure of a run (cached: see _Memo)."""
    return _MEMO.get(analysis, ("figure", highlight, per_launch), lambda: _build_figure(analysis, highlight, per_launch))


def _sent(analysis: Analysis, key: tuple[Any, ...], figure: Callable[[], go.Figure]) -> dict[str, Any]:
    """Return a figure as the plain data a callback sends, converted once per run: Dash would otherwise validate and
    convert the same Figure object on every request."""
    sent: dict[str, Any] = _MEMO.get(analysis, ("sent", *key), lambda: figure().to_plotly_json())
    return sent


def _build_figure(analysis: Analysis, highlight: str | None, per_launch: bool) -> go.Figure:
    """The view's main figure (a roofline marks the highlighted kernel, and every launch when asked)."""
    figure: go.Figure = view_for(analysis).figure(analysis, highlight, per_launch)
    return figure


_CSS = """
body { font-family: system-ui, sans-serif; margin: 0 1.5rem; color: #222; }
.bar { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; margin: 0.5rem 0; }
.upload { border: 1px dashed #888; padding: 0.5rem 1rem; border-radius: 6px; cursor: pointer; }
.error { color: #b00020; font-weight: 600; } .warning { color: #a15c00; } .hint { color: #666; }
.metrics th { text-align: left; padding-right: 1rem; font-weight: normal; color: #555; }
.columns { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 1fr); gap: 1.5rem; }
.columns > div { min-width: 0; overflow-wrap: anywhere; }  /* long kernel names wrap instead of widening the page */
@media (max-width: 1100px) { .columns { grid-template-columns: minmax(0, 1fr); } }
"""


# What Dash needs: its renderer starts from inline scripts, and Plotly builds some functions at run time.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
                           "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
                           "form-action 'self'")


def _session() -> str | None:
    """The browser session of the request being served (None outside a request or before the cookie is set)."""
    if not flask.has_request_context():
        return None
    value = flask.request.cookies.get(SESSION_COOKIE, "")
    return value if re.fullmatch(r"[A-Za-z0-9_-]{16,64}", value) else None


def _host_of(header: str) -> str:
    """The host name of a Host header, without the port: `127.0.0.1:8050` → `127.0.0.1`, `[::1]:8050` → `::1`."""
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


# What each callback input and state may hold, as the page sends it: a request with anything else was not made by
# the page (a hand-made or fuzzed request), and is refused with 400 before a callback sees it.
_OPTIONAL_TEXT = (str, type(None))
CALLBACK_VALUE_TYPES: dict[tuple[str, str], tuple[type, ...]] = {
    ("upload", "contents"): _OPTIONAL_TEXT, ("upload", "filename"): _OPTIONAL_TEXT,
    ("run", "value"): _OPTIONAL_TEXT, ("compare-before", "value"): _OPTIONAL_TEXT, ("compare-after", "value"): _OPTIONAL_TEXT,
    ("tabs", "value"): _OPTIONAL_TEXT, ("per-launch", "value"): (list, type(None)),
    ("roofline", "clickData"): (dict, type(None)), ("timeline", "clickData"): (dict, type(None)),
    ("timeline", "relayoutData"): (dict, type(None)), ("kernels", "selectedRows"): (list, type(None)),
}


def _well_formed_callback(body: object) -> bool:
    """True for a callback request as the page sends it: an output, and inputs and states of known components
    carrying values of their types."""
    if not isinstance(body, dict) or not isinstance(body.get("output"), str) or "outputs" not in body:
        return False
    items = body.get("inputs", [])
    states = body.get("state", [])
    if not isinstance(items, list) or not isinstance(states, list):
        return False
    for item in [*items, *states]:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("property"), str):
            return False
        expected = CALLBACK_VALUE_TYPES.get((item["id"], item["property"]))
        if expected is None or ("value" in item and not isinstance(item["value"], expected)):
            return False
    return True


class _UploadSafeRequest(flask.Request):
    """A request whose JSON body the guard reads once, in pieces, and parses from its text (the parse cached for
    Dash's get_json, the raw bytes let go).

    werkzeug's get_json parses the cached raw body, and json.loads of bytes decodes them into a text first: an upload
    callback's body is the file in base64, so the bytes, their text and the string parsed from them were held at once
    (4× the upload), and a chunked body was joined from its pieces (2× again)."""

    def parse_json_body(self) -> object:
        """Return the body parsed as JSON, or None where it is not JSON (cached for get_json())."""
        raw = bytearray()
        for piece in iter(lambda: self.stream.read(1 << 20), b""):  # the stream stops a chunked body at the limit
            raw += piece
        try:
            text: str | None = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        raw.clear()
        parsed: object = None
        if text is not None:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            text = None
        self._cached_json = (parsed, parsed)  # werkzeug's cache of get_json(silent=False), get_json(silent=True)
        self._cached_data = b""  # and of get_data(): read once, nothing reads it again
        return parsed


def _guard(server: flask.Flask, allowed_hosts: set[str] | None) -> None:
    """Refuse requests for other host names (DNS rebinding) and malformed callback requests; send the security
    headers and the session cookie."""

    @server.before_request
    def refuse() -> Any:
        if allowed_hosts is not None and _host_of(flask.request.host).lower() not in allowed_hosts:
            return flask.Response("traceview: this server answers only for " + ", ".join(sorted(allowed_hosts)) + "\n", 403, mimetype="text/plain")
        limit = server.config.get("MAX_CONTENT_LENGTH")
        upload_mb = max(0, (limit or 0) - 2**20) * 3 // 4 // 2**20  # the limit is on the base64 body in JSON: 4/3 of the file
        too_large = flask.Response(f"traceview: the request is larger than an upload of {upload_mb} MB (--max-upload-mb)\n", 413,
                                   mimetype="text/plain", headers={"Connection": "close"})  # not left open while the rest drains in
        if limit and (flask.request.content_length or 0) > limit:  # refused before a byte of the body is read
            return too_large
        if flask.request.method == "POST" and flask.request.path.endswith("_dash-update-component"):
            request = flask.request._get_current_object()  # type: ignore[attr-defined]  # the proxied Request itself
            try:
                # Read through the request's limited stream: a body without a length (chunked) stops at the limit,
                # and one that reaches it is refused.
                body = request.parse_json_body() if isinstance(request, _UploadSafeRequest) else request.get_json(silent=True)
            except werkzeug.exceptions.RequestEntityTooLarge:
                return too_large
            if not _well_formed_callback(body):
                return flask.Response("traceview: malformed callback request\n", 400, mimetype="text/plain")
        return None

    @server.after_request
    def headers(response: flask.Response) -> flask.Response:
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        if _session() is None:
            response.set_cookie(SESSION_COOKIE, secrets.token_urlsafe(24), httponly=True, samesite="Strict", max_age=7 * 24 * 3600)
        return response


def create_app(
    store: RunStore,
    analyze_file: Callable[[Path], Analysis],
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_MB * 2**20,
    allowed_hosts: set[str] | None = None,
) -> dash.Dash:
    """Return the Dash app over a store of analyses; `analyze_file` reads an uploaded file (raising TraceviewError).

    `allowed_hosts`: the Host header names the server answers for (None: any). Requests larger than an upload of
    `max_upload_bytes` (base64 in JSON) are refused by the server itself, before they are read."""
    app = dash.Dash(__name__, title="traceview", update_title=None)  # type: ignore[arg-type]  # None turns the "Updating…" title off, as Dash documents
    app.index_string = app.index_string.replace("{%css%}", "{%css%}<style>" + _CSS + "</style>")
    app.server.request_class = _UploadSafeRequest
    app.server.config["MAX_CONTENT_LENGTH"] = max_upload_bytes * 4 // 3 + 2**20
    _guard(app.server, allowed_hosts)
    app.layout = lambda: _layout(store.labels(_session()), max_upload_bytes)
    _callbacks(app, store, analyze_file, max_upload_bytes)
    return app


def _layout(labels: list[str], max_upload_bytes: int) -> html.Div:
    """The page, with the runs this browser can see (the shared ones and its own uploads)."""
    first = labels[0] if labels else None
    return html.Div([
        html.H1("traceview"),
        html.Div(className="bar", children=[
            html.Label("Run"), dcc.Dropdown(id="run", options=labels, value=first, clearable=False, style={"minWidth": "320px"}),
            dcc.Upload(id="upload", children=html.Div("Drop another export here, or click to choose one"), className="upload",
                       max_size=max_upload_bytes, multiple=False),
            dcc.Checklist(id="per-launch", options=[{"label": " one dot per launch", "value": "yes"}], value=[]),
        ]),
        html.Div(id="message", role="alert"),
        html.P(id="summary"),
        dcc.Tabs(id="tabs", value="main", children=[
            dcc.Tab(label="Roofline and bottlenecks", value="main", children=[
                html.Div(className="columns", children=[
                    html.Div([
                        dcc.Graph(id="roofline", config={"displaylogo": False}),
                        dag.AgGrid(
                            id="kernels", rowData=[], columnDefs=KERNEL_GRID_COLUMNS, getRowId="params.data.id",
                            defaultColDef={"sortable": True, "filter": True, "resizable": True, "minWidth": 70},
                            dashGridOptions={"rowSelection": {"mode": "singleRow", "checkboxes": False, "enableClickSelection": True},
                                             "pagination": True, "paginationPageSize": 25, "paginationPageSizeSelector": [25, 50, 100],
                                             "tooltipShowDelay": 300},
                            columnSize="responsiveSizeToFit", style={"height": "480px", "width": "100%"},
                        ),
                    ]),
                    html.Div([html.Div(id="detail"), html.Div(id="side")]),
                ]),
            ]),
            dcc.Tab(label="Telemetry", value="telemetry-tab", children=[
                html.P("Jetson tegrastats logs: bandwidth against the board's peak, GPU load, clocks, power and temperatures on one "
                       "time axis; shaded stretches are findings (clock caps, heat, CPU-bound stretches).", className="hint"),
                dcc.Graph(id="telemetry", config={"displaylogo": False}),
            ]),
            dcc.Tab(label="Timeline", value="timeline-tab", children=[
                html.P("Nsight Systems runs: each lane shaded by how busy it is; drag to zoom (the server re-bins the window), "
                       "double-click to reset; click a red × for the cause of an idle gap, or an event for its name.", className="hint"),
                dcc.Graph(id="timeline", config={"displaylogo": False}),
                html.Div(id="timeline-detail"),
            ]),
            dcc.Tab(label="Compare runs", value="compare", children=[
                html.Div(className="bar", children=[
                    html.Label("Before"), dcc.Dropdown(id="compare-before", options=labels, value=first, style={"minWidth": "280px"}),
                    html.Label("After"), dcc.Dropdown(id="compare-after", options=labels, value=labels[1] if len(labels) > 1 else None,
                                                      style={"minWidth": "280px"}),
                ]),
                html.Div(id="compare"),
            ]),
        ]),
    ])


def _callbacks(app: dash.Dash, store: RunStore, analyze_file: Callable[[Path], Analysis], max_upload_bytes: int) -> None:
    @app.callback(
        Output("run", "options"), Output("run", "value"), Output("compare-before", "options"), Output("compare-after", "options"),
        Output("compare-after", "value"), Output("message", "children"),
        Input("upload", "contents"), State("upload", "filename"), State("run", "value"), prevent_initial_call=True,
    )
    def upload(contents: str | None, filename: str | None, current: str | None) -> tuple[Any, ...]:
        session = _session()
        options = store.labels(session)
        if not contents:
            return options, current, options, options, dash.no_update, html.P("The upload was empty or larger than the limit.", className="error")
        try:
            label = store.add(analyze_upload(contents, filename or "upload", analyze_file, max_upload_bytes), filename or "upload", session)
        except TraceviewError as error:
            return options, current, options, options, dash.no_update, html.P(f"Error: {error}", className="error")
        options = store.labels(session)
        return options, label, options, options, label, html.P(f"Loaded {filename}.", className="hint")

    @app.callback(
        Output("roofline", "figure"), Output("kernels", "rowData"), Output("kernels", "selectedRows"), Output("summary", "children"),
        Output("side", "children"), Output("detail", "children", allow_duplicate=True),
        Input("run", "value"), Input("per-launch", "value"), prevent_initial_call="initial_duplicate",
    )
    def show_run(label: str | None, per_launch: list[str]) -> tuple[Any, ...]:
        # Another run means another set of kernels: the detail of the last one selected would be stale.
        analysis = store.get(label, _session())
        if analysis is None:
            return go.Figure(), [], [], "No run loaded.", [], []
        rows = _MEMO.get(analysis, ("rows",), lambda: table_rows(analysis))
        side = _MEMO.get(analysis, ("side",), lambda: side_panel(analysis))
        main = _sent(analysis, ("figure", None, bool(per_launch)), lambda: figure_for(analysis, None, bool(per_launch)))
        return main, rows, [], summary_line(analysis), side, detail_panel(analysis, None)

    @app.callback(
        Output("detail", "children", allow_duplicate=True), Output("roofline", "figure", allow_duplicate=True),
        Output("kernels", "selectedRows", allow_duplicate=True),
        Input("roofline", "clickData"), State("run", "value"), State("per-launch", "value"), prevent_initial_call=True,
    )
    def click_dot(click: dict[str, Any] | None, label: str | None, per_launch: list[str]) -> tuple[Any, ...]:
        """A click on a kernel's dot selects it, as a click on its table row does."""
        analysis = store.get(label, _session())
        points = (click or {}).get("points") or []
        name = points[0].get("customdata") if points and isinstance(points[0], dict) else None
        if isinstance(name, list):
            name = name[0] if name else None
        if analysis is None or not isinstance(name, str):
            return dash.no_update, dash.no_update, dash.no_update
        row = next((r for r in table_rows(analysis) if r["id"] == name), None)
        if row is None:
            return dash.no_update, dash.no_update, dash.no_update
        return detail_panel(analysis, name), _sent(analysis, ("figure", name, bool(per_launch)), lambda: figure_for(analysis, name, bool(per_launch))), [row]

    @app.callback(
        Output("detail", "children"), Output("roofline", "figure", allow_duplicate=True),
        Input("kernels", "selectedRows"), State("run", "value"), State("per-launch", "value"), prevent_initial_call=True,
    )
    def select(rows: list[dict[str, Any]] | None, label: str | None, per_launch: list[str]) -> tuple[Any, ...]:
        analysis = store.get(label, _session())
        if analysis is None:
            return [], dash.no_update
        name = rows[0].get("id") if rows and isinstance(rows[0], dict) else None
        return detail_panel(analysis, name), _sent(analysis, ("figure", name, bool(per_launch)), lambda: figure_for(analysis, name, bool(per_launch)))

    @app.callback(Output("telemetry", "figure"), Input("run", "value"), Input("tabs", "value"))
    def show_telemetry(label: str | None, tab: str) -> Any:
        if tab != "telemetry-tab":
            return dash.no_update
        analysis = store.get(label, _session())
        if analysis is None or analysis.telemetry is None:
            return go.Figure(layout={"title": "The telemetry view needs a tegrastats log"})
        return _sent(analysis, ("telemetry",), lambda: telemetry_figure(analysis))

    @app.callback(Output("timeline", "figure"), Output("timeline-detail", "children"),
                  Input("run", "value"), Input("timeline", "relayoutData"), Input("tabs", "value"), Input("kernels", "selectedRows"))
    def show_timeline(label: str | None, relayout: dict[str, Any] | None, tab: str, rows: list[dict[str, Any]] | None) -> tuple[Any, ...]:
        """Re-bin the window the user zoomed to (the browser only ever holds one window's bins), with the launches of
        the kernel selected in the table marked."""
        if tab != "timeline-tab":
            return dash.no_update, dash.no_update
        analysis = store.get(label, _session())
        if analysis is None or analysis.timeline is None or analysis.timeline.export is None:
            return go.Figure(layout={"title": "The timeline needs an Nsight Systems SQLite export"}), []
        trigger = dash.ctx.triggered_id
        window = _window(relayout) if trigger in ("timeline", "kernels") else None
        highlight = rows[0].get("id") if rows and isinstance(rows[0], dict) else None
        if window is None and highlight is None:  # the whole run is what every client asks for first: drawn once
            return _sent(analysis, ("timeline",), lambda: timeline_figure(analysis)), []
        start_ms, end_ms = window or (None, None)
        return timeline_figure(analysis, start_ms, end_ms, highlight=highlight), dash.no_update if window else []

    @app.callback(Output("timeline-detail", "children", allow_duplicate=True), Input("timeline", "clickData"), State("run", "value"),
                  prevent_initial_call=True)
    def timeline_click(click: dict[str, Any] | None, label: str | None) -> Any:  # components, or dash.no_update
        analysis = store.get(label, _session())
        points = (click or {}).get("points") or []
        data = points[0].get("customdata") if points and isinstance(points[0], dict) else None
        if analysis is None or analysis.timeline is None or not isinstance(data, list) or len(data) != 2:
            return dash.no_update
        return gap_detail(analysis, data[0]) if data[1] == "gap" else event_detail(analysis, data[0])

    @app.callback(Output("compare", "children"), Input("compare-before", "value"), Input("compare-after", "value"), Input("tabs", "value"))
    def compare_runs(before: str | None, after: str | None, _tab: str) -> list[Any]:
        return compare_panel(store.get(before, _session()), store.get(after, _session()))


_DECODE_CHARS = 4 << 20  # base64 decoded this many characters at a time (a multiple of 4): never a whole copy of the upload


def analyze_upload(contents: str, filename: str, analyze_file: Callable[[Path], Analysis], max_upload_bytes: int) -> Analysis:
    """Decode a dcc.Upload payload into a temporary file, analyze it, and remove the file again.

    The payload is decoded piece by piece straight to the file: slicing it, encoding it to bytes and decoding it whole
    held four copies of a 500 MB upload at once (issue 32)."""
    comma = contents.find(",")
    if comma < 0:
        raise TraceviewError(f"{filename}: the upload could not be decoded")
    encoded_chars = len(contents) - comma - 1
    if encoded_chars // 4 * 3 > max_upload_bytes + 3:
        raise TraceviewError(f"{filename}: {encoded_chars * 3 / 4 / 2**20:.0f} MB is over the {max_upload_bytes / 2**20:.0f} MB upload limit (--max-upload-mb)")
    suffix = _SAFE_NAME.sub("_", Path(filename).suffix)[:16]
    with tempfile.TemporaryDirectory(prefix="traceview-upload-") as folder:
        path = Path(folder) / f"upload{suffix}"
        try:
            with path.open("wb") as handle:
                for at in range(comma + 1, len(contents), _DECODE_CHARS):
                    handle.write(base64.b64decode(contents[at: at + _DECODE_CHARS], validate=False))
        except (binascii.Error, ValueError) as error:  # ValueError: a character outside ASCII
            raise TraceviewError(f"{filename}: the upload could not be decoded") from error
        if path.stat().st_size > max_upload_bytes:
            raise TraceviewError(f"{filename}: {path.stat().st_size / 2**20:.0f} MB is over the {max_upload_bytes / 2**20:.0f} MB upload limit (--max-upload-mb)")
        try:
            analysis = analyze_file(path)
        except TraceFormatError as error:
            # Name the user's file, not the temporary copy.
            raise TraceFormatError(Path(filename), error.problem, error.fix, error.line) from None
    # Show the user's file name, not the temporary path; every other field as the analysis made it.
    return dataclasses.replace(analysis, source=dataclasses.replace(analysis.source, path=filename))
