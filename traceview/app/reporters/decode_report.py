"""Decode-ceiling output: plain data (the JSON contract of `traceview decode`) and the report every reporter renders."""

from __future__ import annotations

from typing import Any

from traceview.analyzer.decode import DecodeCeiling
from traceview.analyzer.jetson import Telemetry, active_bandwidth
from traceview.app.document import Document, Report, para
from traceview.wording import counted


def decode_record(result: DecodeCeiling, bandwidth_source: str, telemetry: Telemetry | None) -> dict[str, Any]:
    """Return the decode ceiling as plain data: bytes, bytes/s, tokens/s, percent."""
    data: dict[str, Any] = {
        "weight_bytes": result.weight_bytes,
        "kv_bytes_per_sequence": result.kv_bytes_per_sequence,
        "batch": result.batch,
        "bytes_per_step": result.bytes_per_step,
        "bytes_per_token": result.bytes_per_token,
        "bandwidth_bytes_per_s": result.bandwidth_bytes_per_s,
        "bandwidth_source": bandwidth_source,
        "ceiling_tokens_per_s": result.ceiling_tokens_per_s,
        "ceiling_tokens_per_s_per_sequence": result.ceiling_tokens_per_s_per_sequence,
        "measured_tokens_per_s": result.measured_tokens_per_s,
        "achieved_bytes_per_s": result.achieved_bytes_per_s,
        "mbu_pct": result.mbu_pct,
        "warning": result.warning,
    }
    if telemetry is not None:
        data["tegrastats"] = tegrastats_decode_record(telemetry, result)
    return data


def tegrastats_decode_record(telemetry: Telemetry, result: DecodeCeiling) -> dict[str, Any]:
    """Return the EMC bandwidth measured while the GPU was busy: the decode window of the log."""
    samples, mean, p90 = active_bandwidth(telemetry)
    record: dict[str, Any] = {
        "board": telemetry.board.key if telemetry.board else None,
        "samples_total": telemetry.samples,
        "samples_gpu_busy": samples,
        "emc_bandwidth_bytes_per_s_mean": mean,
        "emc_bandwidth_bytes_per_s_p90": p90,
    }
    record["emc_pct_of_bandwidth"] = 100.0 * mean / result.bandwidth_bytes_per_s if mean else None
    if mean and result.measured_tokens_per_s:
        record["emc_bytes_per_token"] = mean / result.measured_tokens_per_s
    if mean is None:
        record["note"] = "no EMC clock in the log (run tegrastats as root) — bandwidth not measurable"
    return record


def _gb(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1e9:.2f} GB"


def decode_report(data: dict[str, Any]) -> Report:
    """The decode ceiling as a report: one aligned line per quantity, the record as its JSON."""
    return Report(Document("traceview decode: the memory-bandwidth ceiling of LLM decode", tuple(para(line) for line in decode_lines(data)),
                           banner="decode ceiling"), data)


def decode_lines(data: dict[str, Any]) -> list[str]:
    """The decode ceiling as aligned `quantity : value` lines (bytes per step and token, bandwidth, ceiling, MBU)."""
    lines = [
        f"bytes per decode step : {_gb(data['bytes_per_step'])} (weights {_gb(data['weight_bytes'])}"
        + (f" + {data['batch']} × KV {_gb(data['kv_bytes_per_sequence'])}" if data["kv_bytes_per_sequence"] else "")
        + ")",
        f"bytes per token       : {_gb(data['bytes_per_token'])} (batch {data['batch']})",
        f"bandwidth             : {data['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s — {data['bandwidth_source']}",
        f"decode ceiling        : {data['ceiling_tokens_per_s']:.1f} tokens/s"
        + (f" ({data['ceiling_tokens_per_s_per_sequence']:.1f} per sequence)" if data["batch"] > 1 else ""),
    ]
    if data["measured_tokens_per_s"] is not None:
        lines.append(
            f"measured              : {data['measured_tokens_per_s']:.1f} tokens/s = {data['achieved_bytes_per_s'] / 1e9:.1f} GB/s, "
            f"MBU {data['mbu_pct']:.1f}% of the bandwidth"
        )
    if data["warning"]:
        lines.append(f"warning               : {data['warning']}")
    teg = data.get("tegrastats")
    if teg:
        if teg.get("emc_bandwidth_bytes_per_s_mean"):
            lines.append(
                f"tegrastats (GPU busy) : EMC {teg['emc_bandwidth_bytes_per_s_mean'] / 1e9:.1f} GB/s mean, "
                f"{teg['emc_bandwidth_bytes_per_s_p90'] / 1e9:.1f} GB/s p90 over {counted(teg['samples_gpu_busy'], 'sample')} "
                f"({teg['emc_pct_of_bandwidth']:.0f}% of the bandwidth)"
            )
        else:
            lines.append(f"tegrastats            : {teg.get('note')}")
    return lines
