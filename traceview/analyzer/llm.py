"""llama.cpp runs: decode memory-bandwidth utilisation (MBU), prefill against compute, scaling across rows. Pure.

Decode moves every weight once per token, so bytes per token = the model size llama.cpp reports (or --weights),
achieved bandwidth = tokens/s × bytes per token, and MBU = achieved / the device's DRAM bandwidth. The KV cache and
activations are left out (small at llama-bench's short contexts), so MBU is a slight underestimate.
Prefill is judged against compute: about 2 × parameters FLOP per token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.devices import GpuSpec, find_by_name

# Repeating layers of the Llama family by size, to tell a partial offload (`-ngl` below the layer count).
_LLAMA_LAYERS = {"1B": 16, "3B": 28, "7B": 32, "8B": 32, "13B": 40, "30B": 60, "33B": 60, "34B": 48, "65B": 80, "70B": 80}
FULL_OFFLOAD_NGL = 99  # llama-bench's "everything" default


@dataclass(frozen=True)
class LlmAnalysis:
    """Per-measurement rows with bandwidth and MBU, the device(s) used, and findings across rows."""

    runs: pl.DataFrame
    findings: list[dict[str, Any]] = field(default_factory=list)


def _layers(model: str | None) -> int | None:
    if not model:
        return None
    match = re.search(r"\bllama (\d+B)\b", model, re.IGNORECASE)
    return _LLAMA_LAYERS.get(match.group(1).upper()) if match else None


def _offload(row: dict[str, Any], table_max_ngl: int | None) -> tuple[str, str | None]:
    """Return (offload, note): full, partial, cpu or unknown, for one row."""
    backend = (row.get("backend") or "").upper()
    ngl = row.get("n_gpu_layers")
    if backend in ("CPU", "BLAS") or ngl == 0:
        return "cpu", "CPU run: host memory bandwidth bounds decode"
    if ngl is None:
        return "unknown", None
    if ngl >= FULL_OFFLOAD_NGL:
        return "full", None
    layers = _layers(row.get("model"))
    if table_max_ngl is not None and ngl < table_max_ngl:
        return "partial", f"partial offload (ngl {ngl} < {table_max_ngl}): host memory bounds it"
    if layers is not None and ngl <= layers:
        return "partial", f"partial offload (ngl {ngl} of {layers} layers + output): host memory bounds it"
    return "full", None


def analyze_runs(
    runs: pl.DataFrame,
    gpu: GpuSpec | None = None,
    bandwidth_bytes_per_s: float | None = None,
    weight_bytes: float | None = None,
) -> LlmAnalysis:
    """Return the runs with bytes_per_token, bandwidth_bytes_per_s, mbu_pct, offload and prefill compute share."""
    table_max = {
        (row["table"], row["model"]): row["n_gpu_layers"]
        for row in runs.group_by("table", "model").agg(pl.col("n_gpu_layers").max()).iter_rows(named=True)
    }
    records = []
    for row in runs.iter_rows(named=True):
        spec = gpu or (find_by_name(row["device_name"]) if row.get("device_name") else None)
        peak_bw = bandwidth_bytes_per_s or (spec.dram_bytes_per_s if spec else None)
        device = "--bandwidth" if bandwidth_bytes_per_s else (spec.name if spec else row.get("device_name"))
        offload, note = _offload(row, table_max.get((row["table"], row["model"])))
        if note is None and "nkvo=1" in (row.get("options") or ""):
            note = "nkvo=1: the KV cache stays in host memory, so decode reads it over PCIe"
        record = {**row, "device": device, "device_bandwidth_bytes_per_s": peak_bw, "offload": offload, "note": note,
                  "bytes_per_token": None, "bandwidth_bytes_per_s": None, "mbu_pct": None,
                  "achieved_flop_per_s": None, "compute_pct": None}
        rate = row.get("tokens_per_s")
        if row["phase"] == "decode" and rate:
            per_token = weight_bytes or row.get("model_size_bytes")
            if per_token:
                record["bytes_per_token"] = per_token
                record["bandwidth_bytes_per_s"] = rate * per_token
                if peak_bw and offload in ("full", "unknown") or (bandwidth_bytes_per_s and peak_bw):
                    record["mbu_pct"] = 100.0 * rate * per_token / peak_bw
            elif note is None:
                record["note"] = "no model size in this output: pass --weights to get bandwidth and MBU"
            if record["mbu_pct"] is not None and record["mbu_pct"] > 100:
                record["note"] = (f"MBU {record['mbu_pct']:.0f}% is above 100%: wrong bytes per token (--weights) or wrong device "
                                  "bandwidth (--gpu/--bandwidth)")
            if peak_bw is None and record["note"] is None:
                record["note"] = "device not named in the output: pass --gpu NAME or --bandwidth to get MBU"
        elif row["phase"] == "prefill" and rate and row.get("model_params"):
            record["achieved_flop_per_s"] = 2.0 * row["model_params"] * rate
            if spec and spec.tensor_fp16_flop_per_s and offload == "full":
                record["compute_pct"] = 100.0 * record["achieved_flop_per_s"] / spec.tensor_fp16_flop_per_s
        records.append(record)
    frame = pl.DataFrame(records, infer_schema_length=None) if records else runs
    return LlmAnalysis(frame, _size_scaling(frame) + _ngl_scaling(frame))


def _size_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The field's Q8-vs-Q4 test: bandwidth-bound decode speeds up in proportion to the bytes saved."""
    decode = frame.filter((pl.col("phase") == "decode") & pl.col("bytes_per_token").is_not_null() & (pl.col("offload") != "partial"))
    findings = []
    for (_, _, test), group in decode.group_by(["device", "backend", "test"], maintain_order=True):
        sizes = group.group_by("bytes_per_token").agg(pl.col("tokens_per_s").mean(), pl.col("model").first()).sort("bytes_per_token")
        if sizes.height < 2:
            continue
        small, big = sizes.row(0, named=True), sizes.row(sizes.height - 1, named=True)
        byte_ratio = big["bytes_per_token"] / small["bytes_per_token"]
        speedup = small["tokens_per_s"] / big["tokens_per_s"]
        bound = speedup >= 0.8 * byte_ratio
        findings.append({
            "kind": "size_scaling",
            "bandwidth_bound": bound,
            "message": (
                f"{test}: {small['model']} moves {byte_ratio:.2f}× fewer bytes per token than {big['model']} and decodes "
                f"{speedup:.2f}× faster — " + (
                    "speedup tracks the bytes saved: decode is memory-bandwidth-bound" if bound
                    else "far less than the bytes saved: decode is not purely bandwidth-bound (compute, dequantization or overheads)")
            ),
            "evidence": {"byte_ratio": byte_ratio, "speedup": speedup},
        })
    return findings


def _ngl_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    findings = []
    decode = frame.filter((pl.col("phase") == "decode") & pl.col("n_gpu_layers").is_not_null())
    for (table, model), group in decode.group_by(["table", "model"], maintain_order=True):
        by_ngl = group.group_by("n_gpu_layers").agg(pl.col("tokens_per_s").mean()).sort("n_gpu_layers")
        if by_ngl.height < 3:
            continue
        first, last = by_ngl.row(0, named=True), by_ngl.row(by_ngl.height - 1, named=True)
        before = by_ngl.row(by_ngl.height - 2, named=True)
        findings.append({
            "kind": "ngl_scaling",
            "message": (
                f"{model}: decode rises from {first['tokens_per_s']:.1f} tokens/s at ngl {first['n_gpu_layers']} to "
                f"{last['tokens_per_s']:.1f} at ngl {last['n_gpu_layers']} ({last['tokens_per_s'] / first['tokens_per_s']:.1f}×); "
                f"the last step ({before['n_gpu_layers']}→{last['n_gpu_layers']}) alone gives {last['tokens_per_s'] / before['tokens_per_s']:.2f}×: "
                "every layer left on the CPU makes the host's memory the bound"
            ),
            "evidence": {"table": table, "ngl": by_ngl["n_gpu_layers"].to_list(), "tokens_per_s": by_ngl["tokens_per_s"].to_list()},
        })
    return findings
