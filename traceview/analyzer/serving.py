"""The analysis of LLM serving benchmark results against the memory-bandwidth floor of each decode step.

A decode step reads the weights once and every running sequence's KV cache once (Kwon et al., vLLM; the decode
maths of analyzer.decode). At B sequences decoding together with a mean context of C tokens, a step moves
weights + B × C × (KV bytes per token), and cannot take less than that over the GPU's memory bandwidth: the TPOT
floor. The measured median and p99 TPOT against it give the bandwidth utilisation (MBU); where the gap is large the
findings say what it is most likely made of, with their numbers.

B is the benchmark's `max_concurrency`, else the server's `--max-num-seqs` when every request was sent at once,
else Little's law on the measurement (sequences decoding at once = output tokens/s × TPOT); C is the mean prompt
plus half the mean output (the context grows through the decode).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceview.analyzer.analysis import Analysis, Device, Peak, Source, _table_peaks, _without_launches
from traceview.analyzer.devices import lookup_gpu
from traceview.analyzer.ranking import rank_kernels

if TYPE_CHECKING:
    from traceview.analyzer.kinds import AnalysisOptions  # kinds imports this module's analysis

# Model configurations (Hugging Face config.json): parameters, layers, KV heads, head dimension. A model named in a
# result is looked up by these keys in its name (the last path part, lower case).
MODELS: dict[str, tuple[float, int, int, int]] = {
    "llama-2-7b": (6.74e9, 32, 32, 128), "llama-2-13b": (13.0e9, 40, 40, 128), "llama-2-70b": (69.0e9, 80, 8, 128),
    "llama-3-8b": (8.03e9, 32, 8, 128), "llama-3.1-8b": (8.03e9, 32, 8, 128), "llama-3-70b": (70.6e9, 80, 8, 128),
    "llama-3.1-70b": (70.6e9, 80, 8, 128), "mistral-7b": (7.24e9, 32, 8, 128), "qwen2-7b": (7.62e9, 28, 4, 128),
    "qwen2.5-7b": (7.62e9, 28, 4, 128), "opt-1.3b": (1.32e9, 24, 32, 64), "opt-2.7b": (2.65e9, 32, 32, 80),
    "opt-6.7b": (6.66e9, 32, 32, 128), "opt-13b": (12.9e9, 40, 40, 128),
}
# Weights and KV cache in 16 bits unless told: the serving default (fp16/bf16).
DEFAULT_BYTES_PER_VALUE = 2
LOW_MBU_PCT = 50.0
PREFILL_TTFT_OVER_TPOT = 50.0
ITL_SPIKE_RATIO = 1.5


@dataclass(frozen=True)
class ServingRun:
    """Serving results (parsers.serving_bench.SERVING rows) with each one's floor: `results` holds per result the
    concurrency and where it came from, context tokens, bytes per step (weights, KV), the TPOT floor (ms) and the MBU
    of the median and p99 TPOT (%); `findings` say what the gap is most likely made of; `assumptions` what was taken
    for what the files do not say."""

    results: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    bandwidth_bytes_per_s: float | None = None
    bandwidth_source: str | None = None


def model_config(name: str | None) -> tuple[str, tuple[float, int, int, int]] | None:
    """The MODELS entry a model name or path names, longest key first (`llama-2-70b` before `llama-2-7b`)."""
    if not name:
        return None
    text = name.rstrip("/").rsplit("/", 1)[-1].lower().replace("_", "-")
    for key in sorted(MODELS, key=len, reverse=True):
        if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", text) or re.search(rf"(?<![\w.]){re.escape(key)}(?=-(?:hf|chat|instruct))", text):
            return key, MODELS[key]
    return None


def _concurrency(row: dict[str, Any]) -> tuple[float | None, str]:
    if row["max_concurrency"]:
        return float(row["max_concurrency"]), "max_concurrency of the benchmark"
    if row["max_num_seqs"] and row["request_rate_per_s"] is None:
        return float(row["max_num_seqs"]), "--max-num-seqs of the server (every request sent at once)"
    tpot = row["median_tpot_ms"]
    if row["output_tokens_per_s"] and tpot:
        return row["output_tokens_per_s"] * tpot / 1000, "Little's law: output tokens/s × median TPOT"
    return None, "unknown"


def _findings(row: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    weights, kv, mbu = result["weight_bytes"], result["kv_bytes_per_step"], result["mbu_median_pct"]
    step = result["bytes_per_step"]
    if step and weights and kv is not None:
        if weights / step > 0.8:
            found.append({"rule": "small_batch", "message": f"the weights are {100 * weights / step:.0f}% of each step's {step / 1e9:.1f} GB at "
                          f"{result['concurrency']:.0f} concurrent sequences: the batch is too small to amortise them — more concurrent "
                          "requests (or a larger --max-num-seqs) raise tokens/s almost for free"})
        elif kv / step > 0.5:
            found.append({"rule": "kv_dominates", "message": f"KV-cache reads are {100 * kv / step:.0f}% of each step ({kv / 1e9:.1f} of {step / 1e9:.1f} GB, "
                          f"{result['context_tokens']:.0f} tokens of context per sequence): at this context length the KV cache, not the weights, "
                          "sets the floor — a quantized KV cache (fp8) or fewer KV heads halve it"})
    ttft, tpot = row["median_ttft_ms"], row["median_tpot_ms"]
    itl, itl99 = row["median_itl_ms"], row["p99_itl_ms"]
    if ttft and tpot and ttft > PREFILL_TTFT_OVER_TPOT * tpot:
        spikes = f"; p99 ITL {itl99:.1f} ms against a median of {itl:.1f} ms: prefills interrupt decodes" if itl and itl99 and itl99 > ITL_SPIKE_RATIO * itl else ""
        found.append({"rule": "queueing_or_prefill", "message": f"median TTFT {ttft:,.0f} ms is {ttft / tpot:,.0f}× the median TPOT ({tpot:.1f} ms): requests "
                      f"wait for a slot or behind prefills{spikes} — lower the request rate, or enable chunked prefill to bound each step's prefill"})
    if mbu is not None and mbu < LOW_MBU_PCT:
        found.append({"rule": "low_bandwidth_use", "message": f"the median TPOT uses {mbu:.0f}% of the memory bandwidth the step's bytes need: the rest is "
                      "scheduler and host time, kernels too small to stream at full bandwidth, or prefill work in the same steps — profile a few "
                      "steps (torch.profiler or nsys) to see which"})
    return found


def analyze_serving(results: pl.DataFrame, source: Source, options: AnalysisOptions) -> Analysis:
    """Return the analysis of serving benchmark results (ServingRun in `detail`): per result its floor and MBU."""
    assumptions: list[str] = []
    bandwidth, bandwidth_source = None, None
    spec = lookup_gpu(options.gpu) if options.gpu else None
    given_weights, given_kv = options.weight_bytes(), options.kv_token_bytes()
    if options.bandwidth:
        bandwidth, bandwidth_source = options.bandwidth_bytes_per_s(), "--bandwidth"
    elif spec is not None:
        bandwidth, bandwidth_source = spec.dram_bytes_per_s, f"{spec.name} datasheet"
    rows = []
    for row in results.iter_rows(named=True):
        config = model_config(row["model"])
        weights: float | None = given_weights
        if weights is None and config:
            weights = config[1][0] * DEFAULT_BYTES_PER_VALUE
            assumptions.append(f"{config[0]}: {config[1][0] / 1e9:.2f} B parameters in 16 bits = {weights / 1e9:.2f} GB of weights (from its "
                               "config; --weights if it is quantized)")
        kv_per_token: float | None = given_kv
        if kv_per_token is None and config:
            _, layers, kv_heads, head_dim = config[1]
            kv_per_token = 2.0 * layers * kv_heads * head_dim * DEFAULT_BYTES_PER_VALUE
            assumptions.append(f"{config[0]}: KV cache {layers} layers × {kv_heads} KV heads × {head_dim} × 2 (K and V) × 2 bytes = "
                               f"{kv_per_token / 1024:.0f} KiB per token")
        concurrency, how = _concurrency(row)
        prompts = row["completed"] or row["num_prompts"]
        context = ((row["total_input_tokens"] or 0) + (row["total_output_tokens"] or 0) / 2) / prompts if prompts and row["total_input_tokens"] else None
        kv_step = concurrency * context * kv_per_token if concurrency and context and kv_per_token else None
        step = weights + (kv_step or 0.0) if weights else None
        floor_ms = 1000 * step / bandwidth if step and bandwidth else None
        result = {**row, "concurrency": concurrency, "concurrency_source": how, "context_tokens": context, "weight_bytes": weights,
                  "kv_bytes_per_token": kv_per_token, "kv_bytes_per_step": kv_step, "bytes_per_step": step, "tpot_floor_ms": floor_ms,
                  "mbu_median_pct": 100 * floor_ms / row["median_tpot_ms"] if floor_ms and row["median_tpot_ms"] else None,
                  "mbu_p99_pct": 100 * floor_ms / row["p99_tpot_ms"] if floor_ms and row["p99_tpot_ms"] else None}
        result["findings"] = _findings(row, result)
        rows.append(result)
    notes = list(dict.fromkeys(assumptions))
    if bandwidth is None:
        notes.append("the results name no GPU: pass --gpu (see `traceview gpus`) or --bandwidth for the TPOT floor and MBU")
    if any(r["weight_bytes"] is None for r in rows):
        notes.append("the model's size is not known from its name: pass --weights 13.5GB (or --params 7B --bits 16)")
    peaks = _table_peaks(spec)
    if bandwidth is not None and spec is None:
        peaks["peak_dram_bytes_per_s"] = Peak(bandwidth, "--bandwidth")
    device = Device(spec.name if spec else None, spec.compute_capability if spec else None, spec,
                    f"chosen with --gpu {options.gpu}" if spec else "the results name no GPU; use --gpu", peaks)
    findings = [f for r in rows for f in r["findings"]]
    run = ServingRun(rows, findings, list(dict.fromkeys(assumptions)), bandwidth, bandwidth_source)
    launches = _without_launches(device)  # a benchmark result holds no kernels
    return Analysis(source, device, launches, rank_kernels(launches), notes, kind="serving-bench", detail=run)
