"""The view of a saved fleet result opened again: its stragglers, then the kernels as for any kernel list; in the
dashboard, the rank × kernel heatmap and the per-rank breakdown."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.analysis import Analysis
from traceview.analyzer.fleet import FleetResult
from traceview.app.document import Block, Document, FigureRef, Heading, bullets, para
from traceview.app.reporters.base import ReportOptions
from traceview.app.reporters.fleet_report import straggler_lines
from traceview.app.views import kernels
from traceview.app.views.common import banner, detail_of, title
from traceview.wording import counted


def document(analysis: Analysis, options: ReportOptions) -> Document:
    result = detail_of(analysis, FleetResult)
    blocks: list[Block] = [para(f"{counted(result.files.height, 'file')} over {counted(result.ranks.height, 'rank')}, "
                                f"{len(result.failures)} failed"),
                           bullets(straggler_lines(result) or ["no straggler"]), FigureRef("traceview-main-figure", lambda: figure(analysis))]
    blocks += kernels.kernel_blocks(analysis, options)
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes), banner(analysis))


def record(analysis: Analysis, options: ReportOptions) -> dict[str, Any]:
    return {}


def summary(analysis: Analysis) -> str:
    fleet = detail_of(analysis, FleetResult)
    return (f"fleet: {counted(fleet.files.height, 'file')} over {counted(fleet.ranks.height, 'rank')}, "
            f"{counted(len(fleet.stragglers), 'straggler')}, {len(fleet.failures)} failed")


def side(analysis: Analysis) -> Document:
    from traceview.app.figures import fleet_breakdown_figure

    fleet = detail_of(analysis, FleetResult)
    blocks: list[Block] = [Heading("Fleet"), bullets(straggler_lines(fleet) or ["no straggler"]),
                           FigureRef("fleet-ranks", lambda: fleet_breakdown_figure(fleet))]
    if fleet.failures:
        blocks += [Heading("Failed files"), bullets([f"{f['path']}: {f['error']}" for f in fleet.failures])]
    return Document(title(analysis), tuple(blocks), tuple(analysis.notes))


def figure(analysis: Analysis, highlight: str | None = None, per_launch: bool = False) -> Any:
    from traceview.app.figures import fleet_heatmap_figure

    return fleet_heatmap_figure(detail_of(analysis, FleetResult))
