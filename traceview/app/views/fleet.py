"""The view of a saved fleet result opened again: its stragglers, then the kernels as for any kernel list; in the
dashboard, the rank × kernel heatmap and the per-rank breakdown."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.fleet import FleetResult
from traceview.app.document import Block, Document, FigureRef, Heading, bullets, para
from traceview.app.reporters.base import ReportOptions
from traceview.app.views import kernels
from traceview.app.views.common import banner, title
from traceview.wording import counted


def _result(analysis: Analysis) -> FleetResult:
    if analysis.fleet is None:
        raise ValueError(f"a {analysis.kind} analysis without a fleet result")  # the registry pairs this view with fleets only
    result: FleetResult = analysis.fleet
    return result


def straggler_lines(result: FleetResult) -> list[str]:
    from traceview.app.reporters.fleet_report import straggler_lines as lines

    return lines(result)


def document(analysis: Analysis, options: ReportOptions) -> Document:
    result = _result(analysis)
    blocks: list[Block] = [para(f"{counted(result.files.height, 'file')} over {counted(result.ranks.height, 'rank')}, "
                                f"{len(result.failures)} failed"),
                           bullets(straggler_lines(result) or ["no straggler"]), FigureRef("traceview-main-figure", lambda: figure(analysis))]
    blocks += kernels.kernel_blocks(analysis, options)
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    return {}


def summary(analysis: Analysis) -> str:
    fleet = _result(analysis)
    return (f"fleet: {counted(fleet.files.height, 'file')} over {counted(fleet.ranks.height, 'rank')}, "
            f"{counted(len(fleet.stragglers), 'straggler')}, {len(fleet.failures)} failed")


def side(analysis: Analysis) -> Document:
    from traceview.app.figures import fleet_breakdown_figure

    fleet = _result(analysis)
    blocks: list[Block] = [Heading("Fleet"), bullets(straggler_lines(fleet) or ["no straggler"]),
                           FigureRef("fleet-ranks", lambda: fleet_breakdown_figure(fleet))]
    if fleet.failures:
        blocks += [Heading("Failed files"), bullets([f"{f['path']}: {f['error']}" for f in fleet.failures])]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes))


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    from traceview.app.figures import fleet_heatmap_figure

    return fleet_heatmap_figure(_result(analysis))
