"""llama.cpp runs: decode memory-bandwidth utilisation (MBU), prefill against compute, scaling across rows. Pure.

Decode moves every weight once per token, so bytes per token = the model size llama.cpp reports (or --weights),
achieved bandwidth = tokens/s × bytes per token, and MBU = achieved / the device's DRAM bandwidth. The KV cache and
activations are left out (small at llama-bench's short contexts), so MBU is a slight underestimate. A mixture of
experts reads only its active experts: the share its name gives (`30B.A3B`), an estimate, else no bytes per token.
Prefill is judged against compute: about 2 × parameters FLOP per token (the active ones for a mixture of experts). A test run at a context depth (llama-bench
-d, `tg128 @ d4096`) also reads the KV cache of that context per token; without the model's layer shapes its size is
unknown, so there bytes per token and MBU count the weights alone (a lower bound) and say so, and the slowdown from
one depth to the next is reported as measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.devices import GpuSpec, find_by_name
from traceview.numbers import float_or_none
from traceview.wording import counted

# Repeating layers of the Llama family by size, to tell a partial offload (`-ngl` below the layer count).
_LLAMA_LAYERS = {"1B": 16, "3B": 28, "7B": 32, "8B": 32, "13B": 40, "30B": 60, "33B": 60, "34B": 48, "65B": 80, "70B": 80, "405B": 126}
FULL_OFFLOAD_NGL = 99  # llama-bench's "everything" default: all layers of a model with fewer than 99
# GPU decode of a whole model usually reaches 50-70% of the memory bandwidth; under a fifth of that, reading the
# weights from the GPU's memory is not what sets the rate.
LOW_MBU_PCT = 10.0


@dataclass(frozen=True)
class LlmAnalysis:
    """Per-measurement rows with bandwidth and MBU, the device(s) used, and findings across rows."""

    runs: pl.DataFrame
    findings: list[dict[str, Any]] = field(default_factory=list)


def _layers(model: str | None, params: float | None = None) -> int | None:
    """Return the repeating layers of a Llama-family model, by the size in its name (`llama 70B`), or, where
    llama.cpp prints `llama ?B`, by its parameter count (within 3% of a known size: 405.85 B is the 405B)."""
    if not model:
        return None
    match = re.search(r"\bllama (\d+B|\?B)(?=\s|$)", model, re.IGNORECASE)
    if not match:
        return None
    if match.group(1) == "?B" and params:
        size = next((k for k in _LLAMA_LAYERS if abs(float(k[:-1]) * 1e9 - params) <= 0.03 * float(k[:-1]) * 1e9), None)
        return _LLAMA_LAYERS[size] if size else None
    return _LLAMA_LAYERS.get(match.group(1).upper())


# llama-bench's `-ncmoe N` (`n_cpu_moe`, 2025+) keeps the experts of the first N layers in host memory; `-ot
# PATTERN=CPU` (`ot` in its table, `tensor_buft_overrides` in -o csv/json) keeps the tensors it names there.
_EXPERTS_ON_HOST = re.compile(r"(?:^|; )n_cpu_moe=([1-9][0-9]*)(?:;|$)")
# The value is itself `;`-separated (`blk\.1\.ffn_.*=ROCm0;exps=CPU`); the options string separates fields with `; `.
_OVERRIDES = re.compile(r"(?:^|; )(?:ot|tensor_buft_overrides)=((?:(?!; ).)*)")
_TO_HOST = re.compile(r"=CPU(?:;|$)")


def _offload(row: dict[str, Any], table_max_ngl: int | None) -> tuple[str, str | None]:
    """Return (offload, note): full, partial, cpu or unknown, for one row."""
    backend = (row.get("backend") or "").upper()
    ngl = row.get("n_gpu_layers")
    if backend in ("CPU", "BLAS") or ngl == 0:
        return "cpu", "CPU run: host memory bandwidth bounds decode"
    options = row.get("options") or ""
    experts = _EXPERTS_ON_HOST.search(options)
    if experts:
        return "partial", f"n_cpu_moe {experts.group(1)}: the experts of up to {experts.group(1)} layers stay in host memory, which bounds decode"
    overrides = _OVERRIDES.search(options)
    if overrides and _TO_HOST.search(overrides.group(1)):
        return "partial", f"tensors kept in host memory (-ot {overrides.group(1)}): host memory bounds decode"
    if ngl is None:
        return "unknown", None
    if ngl < 0:  # llama.h: a negative n_gpu_layers means all layers
        return "full", None
    layers = _layers(row.get("model"), row.get("model_params"))
    # A model with more layers than the 99 that mean "all" to smaller ones keeps the rest on the host (405B: 126).
    if layers is not None and ngl <= layers:
        return "partial", f"partial offload (ngl {ngl} of {layers} layers + output): host memory bounds it"
    if ngl >= FULL_OFFLOAD_NGL:
        return "full", None
    if table_max_ngl is not None and ngl < table_max_ngl:
        return "partial", f"partial offload (ngl {ngl} < {table_max_ngl}): host memory bounds it"
    return "full", None


# Mixture-of-experts models read, per token, only the experts it is routed to: llama.cpp names them `qwen3moe 30B.A3B`
# (3B of 30B parameters active), `gpt-oss 120B`, `llama 8x7B` (Mixtral) or `... moe`.
_MOE_ACTIVE = re.compile(r"\b(\d+(?:\.\d+)?)B\.A(\d+(?:\.\d+)?)B\b", re.IGNORECASE)
_MOE = re.compile(r"moe\b|\bgpt-oss\b|\b\d+x\d+(?:\.\d+)?B\b|\bA\d+(?:\.\d+)?B\b", re.IGNORECASE)


def moe_active_share(model: str | None, params: float | None) -> tuple[bool, float | None]:
    """Return (whether the model is a mixture of experts, the share of its weights one token reads), the share from
    the active parameters its name gives (`30B.A3B` with 30.53 B parameters: 3/30.53), else None."""
    if not model:
        return False, None
    active = _MOE_ACTIVE.search(model)
    total_b, active_b = (float_or_none(active.group(1)), float_or_none(active.group(2))) if active else (None, None)
    if active and active_b is not None and (params or total_b):
        total = params or (total_b or 0.0) * 1e9
        return True, min(1.0, active_b * 1e9 / total) if total > 0 else None
    return bool(_MOE.search(model)), None


def device_list(device_name: str | None) -> list[str]:
    """Return the GPUs a run names, one per entry ("A, B" when several ran it)."""
    return [part.strip() for part in (device_name or "").split(",") if part.strip()]


_SPLIT_MODE = re.compile(r"(?:^|; )(?:split_mode|sm)=(\w+)")


def _device_bandwidth(row: dict[str, Any], gpu: GpuSpec | None) -> tuple[GpuSpec | None, float | None, str | None, int]:
    """Return (table entry, decode's bandwidth ceiling in bytes/s, note for decode, number of GPUs) for a run's device
    list ("A, B" when several GPUs ran it, as llama-bench's gpu_info and the loader's Device N lines give them).

    Several GPUs of one kind: with layer split (llama.cpp's default) each token passes through the GPUs one after
    another, each reading its own layers, so the ceiling is one GPU's bandwidth; with row split every GPU reads its
    share of each layer at once, so it is their sum; with split mode none only the main GPU works."""
    names = device_list(row.get("device_name"))
    spec = gpu or (find_by_name(names[0]) if names and len(set(names)) == 1 else None)
    count = len(names)
    if count <= 1 or gpu is not None:
        return spec, spec.dram_bytes_per_s if spec else None, None, count
    if spec is None and len(set(names)) == 1:
        return None, None, (f"{count}× {names[0]}, not in the GPU table: pass --bandwidth (one card's, for llama.cpp's default layer "
                            "split) to get MBU"), count
    if spec is None:
        return None, None, f"{count} different GPUs ({', '.join(dict.fromkeys(names))}): pass --bandwidth to get MBU", count
    split = _SPLIT_MODE.search(row.get("options") or "")
    mode = split.group(1) if split else "layer"
    if mode == "row":
        return spec, count * spec.dram_bytes_per_s, f"{count} GPUs, row split: each reads its share of every layer at once, MBU against their summed bandwidth", count
    if mode == "none":
        return spec, spec.dram_bytes_per_s, f"{count} GPUs, split mode none: the main GPU alone runs the model", count
    return spec, spec.dram_bytes_per_s, (f"{count} GPUs, layer split: each token passes through them one after another, "
                                         "MBU against one GPU's bandwidth"), count


def _with_note(note: str | None, more: str) -> str:
    """Return a row's note with `more` added after what it says already."""
    return more if note is None else f"{note}; {more}"


def _verification_passes(row: dict[str, Any]) -> tuple[int | None, str | None]:
    """Return (forward passes of the model, note) for a decode run with speculative decoding, else (None, None).

    Each pass verifies the drafted tokens and adds one of its own, so n_gen tokens took n_gen - accepted passes, and
    the weights were read once per pass, not once per token (the drafter's own reads are left out)."""
    accepted, generated, tokens = row.get("draft_accepted"), row.get("draft_generated"), row.get("n_gen")
    if not accepted or not tokens or accepted >= tokens:
        return None, None
    passes = tokens - accepted
    rate = f" ({100.0 * accepted / generated:.1f}%)" if generated else ""
    note = (f"speculative decoding: {accepted:,} of {generated or accepted:,} drafted tokens accepted{rate}, {tokens / passes:.2f} tokens a "
            f"target pass ({passes:,} passes for {tokens:,} tokens): the most drafting can speed decode up, were it free; the weights are "
            f"read once per pass, so bytes/token counts {passes / tokens:.0%} of them (the drafter's reads left out)")
    if row.get("draft_eval_ms") and row.get("draft_eval_tokens"):
        note += f"; the draft model generated {row['draft_eval_tokens']:,} tokens in {row['draft_eval_ms']:,.2f} ms"
    if row.get("verify_ms") and row.get("verify_tokens"):
        note += f"; the target verified {row['verify_tokens']:,} tokens (the prompt and the drafts) in {row['verify_ms']:,.2f} ms"
    return passes, note


def _low_mbu_note(mbu_pct: float, offload: str, backend: str | None) -> str:
    """Return what a decode rate far below the bandwidth roof points to, for a run whose layers are all on the GPU
    (`offload` full) or where the output does not say (unknown); the profiler named is the backend's."""
    if offload == "unknown":
        return (f"MBU {mbu_pct:.1f}%, where GPU decode reaches 50-70%: at this rate the weights are not read from the GPU's memory; "
                "check that the layers are offloaded (-ngl, and a build with GPU support) and the bytes per token (--weights)")
    # Nsight Systems sees CUDA work only: a ROCm, Vulkan, Metal or SYCL run needs its own vendor's profiler.
    cuda = "CUDA" in (backend or "CUDA").upper().split(",")
    profile = "nsys --cuda-graph-trace=node and analyze its export" if cuda else f"the {backend} backend's own profiler"
    return (f"MBU {mbu_pct:.1f}% with every layer on the GPU, where decode reaches 50-70%: something other than reading the "
            f"weights sets each token's time (kernel launches, host synchronisation, sampling); profile a decode step with {profile}")


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
        spec, device_bw, devices_note, gpus = _device_bandwidth(row, gpu)
        peak_bw = bandwidth_bytes_per_s or device_bw
        device = "--bandwidth" if bandwidth_bytes_per_s else (spec.name if spec else row.get("device_name"))
        offload, note = _offload(row, table_max.get((row["table"], row["model"])))
        if note is None and "nkvo=1" in (row.get("options") or ""):
            note = "nkvo=1: the KV cache stays in host memory, so decode reads it over PCIe"
        if row["phase"] == "decode" and devices_note and not bandwidth_bytes_per_s:
            note = devices_note if note is None else f"{note}; {devices_note}"
        record = {**row, "device": device, "device_bandwidth_bytes_per_s": peak_bw, "offload": offload, "note": note,
                  "bytes_per_token": None, "bandwidth_bytes_per_s": None, "mbu_pct": None,
                  "achieved_flop_per_s": None, "compute_pct": None}
        rate = row.get("tokens_per_s")
        sequences = row.get("n_sequences") or 1
        if row["phase"] == "decode" and rate:
            weights = weight_bytes or row.get("model_size_bytes")
            moe, share = (False, None) if weight_bytes else moe_active_share(row.get("model"), row.get("model_params"))
            moe_note = None
            if moe and share and weights:
                weights *= share
                moe_note = (f"mixture of experts: a token reads its active experts, about {share:.0%} of the weights (from the name's active "
                            "parameters): bytes/token and MBU are estimates; --weights sets the bytes one token reads")
            elif moe:
                weights = None
                moe_note = ("mixture of experts: a token reads only the experts it is routed to, not the whole model: pass --weights with "
                            "the bytes one token reads for bandwidth and MBU")
            # B sequences decoded together share each step's read of the weights: B tokens per read.
            per_token = weights / sequences if weights else None
            passes, speculation_note = _verification_passes(row)
            if per_token and passes:
                per_token *= passes / row["n_gen"]
            if per_token:
                record["bytes_per_token"] = per_token
                record["bandwidth_bytes_per_s"] = rate * per_token
                if peak_bw and offload in ("full", "unknown") or (bandwidth_bytes_per_s and peak_bw):
                    record["mbu_pct"] = 100.0 * rate * per_token / peak_bw
            elif note is None and not moe:
                record["note"] = "no model size in this output: pass --weights to get bandwidth and MBU"
            if moe_note:
                record["note"] = _with_note(record["note"], moe_note)
            if record["mbu_pct"] is not None and record["mbu_pct"] > 100:
                record["note"] = (f"MBU {record['mbu_pct']:.0f}% is above 100%: wrong bytes per token (--weights) or wrong device "
                                  "bandwidth (--gpu/--bandwidth)")
            elif record["mbu_pct"] is not None and record["mbu_pct"] < LOW_MBU_PCT and not moe and offload in ("full", "unknown"):
                low = _low_mbu_note(record["mbu_pct"], offload, row.get("backend"))
                record["note"] = _with_note(record["note"], low)
            if peak_bw is None and (record["note"] is None or (per_token and offload in ("full", "unknown"))):
                named = row.get("device_name")
                device_note = (f"{named} is not in the GPU table: pass --gpu NAME or --bandwidth to get MBU" if named
                               else "device not named in the output: pass --gpu NAME or --bandwidth to get MBU")
                record["note"] = _with_note(record["note"], device_note)
            if sequences > 1 and record["bytes_per_token"] is not None:
                shared = f"{sequences} sequences share each read of the weights: bytes/token = weights / {sequences}"
                record["note"] = _with_note(record["note"], shared)
            if speculation_note:
                record["note"] = _with_note(record["note"], speculation_note)
            if row.get("n_depth") and record["bytes_per_token"] is not None:
                depth_note = (f"at depth {row['n_depth']:,} each token also reads the KV cache of the context: bytes/token and MBU count "
                              "the weights alone (a lower bound)")
                record["note"] = _with_note(record["note"], depth_note)
        elif row["phase"] == "prefill" and rate and row.get("model_params"):
            moe, share = moe_active_share(row.get("model"), row.get("model_params"))
            if moe and not share:
                unknown = "mixture of experts with no active parameter count in its name: prefill FLOP unknown"
                record["note"] = _with_note(record["note"], unknown)
                records.append(record)
                continue
            # A token's FLOP are about 2 × the parameters it passes through: for a mixture of experts, the active ones.
            record["achieved_flop_per_s"] = 2.0 * row["model_params"] * (share or 1.0) * rate
            if gpus > 1 and gpu is None:
                several = f"{gpus} GPUs: no compute share (llama.cpp may pipeline a prompt's micro-batches across them)"
                record["note"] = _with_note(record["note"], several)
            elif spec and spec.tensor_fp16_flop_per_s and offload == "full":
                record["compute_pct"] = 100.0 * record["achieved_flop_per_s"] / spec.tensor_fp16_flop_per_s
        records.append(record)
    frame = pl.DataFrame(records, infer_schema_length=None) if records else runs
    return LlmAnalysis(frame, _size_scaling(frame) + _ngl_scaling(frame) + _depth_scaling(frame) + _batch_scaling(frame))


# llama-bench's documented defaults: a run that does not print these options used them.
CONFIG_DEFAULTS = {"nkvo": "0", "fa": "0"}
# Backend flags name the build, not a setting of the run (the backend column says which).
_NOT_SETTINGS = {"cuda", "metal", "gpu_blas", "blas", "vulkan", "sycl", "kompute", "opencl", "format"}
_QUANT = re.compile(r"\b(mostly\s+)?(q\d\w*|iq\d\w*|f16|bf16|f32|fp16|fp8\w*|tq\d\w*)\b", re.IGNORECASE)


def run_settings(row: dict[str, Any]) -> dict[str, str]:
    """Return the run's settings from its options (`n_threads` and `threads` are one key), ngl and backend included."""
    settings: dict[str, str] = {}
    for part in (row.get("options") or "").split(";"):
        key, _, value = part.partition("=")
        key = key.strip().lower().removeprefix("n_")
        if key and value.strip() and key not in _NOT_SETTINGS:
            settings[key] = value.strip()
    if row.get("n_gpu_layers") is not None:
        settings["gpu_layers"] = str(row["n_gpu_layers"])
    if row.get("n_depth"):
        settings["depth"] = str(row["n_depth"])
    if row.get("backend"):
        settings["backend"] = str(row["backend"]).upper()
    return settings


def same_settings(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when no setting that both runs state (or default) differs; a setting only one states is not compared."""
    x, y = run_settings(a), run_settings(b)
    for key in set(x) | set(y):
        first, second = x.get(key, CONFIG_DEFAULTS.get(key)), y.get(key, CONFIG_DEFAULTS.get(key))
        if first is not None and second is not None and first != second:
            return False
    return True


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two runs are the same model, whatever its quantization: parameter counts within 2%, else the same
    name once the quantization and `mostly` are removed. Outputs that name no model on either side (timing lines,
    batched-bench, sweep-bench) are taken as the same model: nothing in them says otherwise."""
    pa, pb = a.get("model_params"), b.get("model_params")
    if pa and pb:
        return bool(abs(pa - pb) <= 0.02 * max(pa, pb))

    def name(row: dict[str, Any]) -> str:
        return " ".join(_QUANT.sub("", str(row.get("model") or "")).lower().split())

    if not name(a) and not name(b):
        return True
    return bool(name(a)) and name(a) == name(b)


def bandwidth_verdict(small: dict[str, Any], big: dict[str, Any]) -> tuple[str, bool | None]:
    """The field's Q8-vs-Q4 test for two decode runs: valid only between quantizations of one model with the same
    settings, fully offloaded. Return (sentence, bandwidth-bound or None when no verdict can be given)."""
    byte_ratio = big["bytes_per_token"] / small["bytes_per_token"]
    speedup = small["tokens_per_s"] / big["tokens_per_s"]
    lead = f"{small['model']} moves {byte_ratio:.2f}× fewer bytes per token than {big['model']} and decodes {speedup:.2f}× as fast"
    if not same_model(small, big):
        return f"{lead}; no verdict: they are different models, and the test compares quantizations of one model", None
    if not same_settings(small, big):
        return f"{lead}; no verdict: the runs differ in settings (threads, batch, KV cache, offload)", None
    if "full" not in (small.get("offload"), big.get("offload")) or "partial" in (small.get("offload"), big.get("offload")):
        return f"{lead}; no verdict: only fully offloaded runs show the GPU's bandwidth", None
    bound = speedup >= 0.8 * byte_ratio
    return lead + (" — the speedup tracks the bytes saved: decode is memory-bandwidth-bound" if bound
                   else " — far less than the bytes saved: decode is not purely bandwidth-bound (compute, dequantization or overheads)"), bound


def _size_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The field's Q8-vs-Q4 test over the rows of one output: per device, backend and test, the two quantizations of
    one model with the same settings that differ most in bytes per token."""
    decode = frame.filter((pl.col("phase") == "decode") & (pl.col("bytes_per_token") > 0) & (pl.col("tokens_per_s") > 0))
    findings = []
    for (_, _, test), group in decode.group_by(["device", "backend", "test"], maintain_order=True):
        rows = group.to_dicts()
        pairs = [(a, b) for a in rows for b in rows if b["bytes_per_token"] > 1.05 * a["bytes_per_token"]]
        if not pairs:
            continue
        valid = [(a, b) for a, b in pairs if bandwidth_verdict(a, b)[1] is not None]
        small, big = max(valid or pairs, key=lambda pair: pair[1]["bytes_per_token"] / pair[0]["bytes_per_token"])
        sentence, bound = bandwidth_verdict(small, big)
        findings.append({"kind": "size_scaling", "bandwidth_bound": bound, "message": f"{test}: {sentence}",
                         "evidence": {"byte_ratio": big["bytes_per_token"] / small["bytes_per_token"],
                                      "speedup": small["tokens_per_s"] / big["tokens_per_s"]}})
    return findings


def _ngl_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    findings = []
    decode = frame.filter((pl.col("phase") == "decode") & pl.col("n_gpu_layers").is_not_null() & (pl.col("tokens_per_s") > 0))
    if "n_depth" in decode.columns:  # runs at another context depth differ by more than their offload
        decode = decode.filter(pl.col("n_depth").fill_null(0) == 0)
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


def _mean_rate_by(group: pl.DataFrame, setting: str) -> tuple[pl.DataFrame, dict[str, Any], dict[str, Any]] | None:
    """Return mean tokens/s per value of a setting in its order, with its first and last row; None for one value."""
    by_setting = group.group_by(setting).agg(pl.col("tokens_per_s").mean()).sort(setting)
    if by_setting.height < 2:
        return None
    return by_setting, by_setting.row(0, named=True), by_setting.row(by_setting.height - 1, named=True)


def _depth_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Per model, backend and phase measured at several context depths (llama-bench -d): tokens/s from the shallowest
    to the deepest, and the drop between them."""
    if "n_depth" not in frame.columns:
        return []
    runs = frame.filter(pl.col("phase").is_in(["decode", "prefill"]) & (pl.col("tokens_per_s") > 0)).with_columns(
        pl.col("n_depth").fill_null(0))
    if "n_sequences" in runs.columns:  # batched runs differ by more than their depth
        runs = runs.filter(pl.col("n_sequences").fill_null(1) == 1)
    findings = []
    for (table, model, backend, phase), group in runs.group_by(["table", "model", "backend", "phase"], maintain_order=True):
        spread = _mean_rate_by(group, "n_depth")
        if spread is None:
            continue
        by_depth, first, last = spread
        change = 100.0 * (last["tokens_per_s"] / first["tokens_per_s"] - 1.0)
        why = ("each token reads the KV cache of the whole context besides the weights" if phase == "decode"
               else "attention over the context grows with it")
        findings.append({
            "kind": "depth_scaling",
            "message": (f"{model or f'table {table + 1}'}{f' ({backend})' if backend else ''}: {phase} {first['tokens_per_s']:.1f} tokens/s at depth "
                        f"{first['n_depth']:,} → {last['tokens_per_s']:.1f} at depth {last['n_depth']:,} ({change:+.0f}%): {why}"),
            "evidence": {"table": table, "phase": phase, "depth": by_depth["n_depth"].to_list(), "tokens_per_s": by_depth["tokens_per_s"].to_list()},
        })
    return findings


# Aggregate decode tokens/s that grows by at least this share of the growth in sequences: each added sequence still
# costs little, so one read of the weights serving more tokens is what is being bought (decode memory-bound).
_BATCH_STILL_PAYS = 0.8


def _batch_scaling(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Per model and test shape run with several batch sizes (llama-batched-bench B): aggregate decode tokens/s from
    the fewest to the most sequences, against the growth in sequences, and the speed each sequence keeps."""
    if "n_sequences" not in frame.columns:
        return []
    # A rate of zero (a damaged row) has no ratio to another.
    decode = frame.filter((pl.col("phase") == "decode") & (pl.col("tokens_per_s") > 0) & (pl.col("n_sequences") > 0))
    findings = []
    for (table, model, depth, tokens), group in decode.group_by(["table", "model", "n_depth", "n_gen"], maintain_order=True):
        spread = _mean_rate_by(group, "n_sequences")
        if spread is None:
            continue
        by_batch, first, last = spread
        growth, speedup = last["n_sequences"] / first["n_sequences"], last["tokens_per_s"] / first["tokens_per_s"]
        still_pays = speedup >= _BATCH_STILL_PAYS * growth
        why = ("decode is still memory-bound: one read of the weights serves every sequence, so more sequences keep paying"
               if still_pays else
               "far less than the sequences added: something besides the weights grows with each sequence (the KV cache it reads, "
               "compute, or kernels that do not batch well)")
        per_sequence = (first["tokens_per_s"] / first["n_sequences"], last["tokens_per_s"] / last["n_sequences"])
        findings.append({
            "kind": "batch_scaling", "memory_bound": still_pays,
            "message": (f"{model or f'table {table + 1}'}: tg{tokens} after {depth:,} prompt tokens: {first['tokens_per_s']:.1f} tokens/s with "
                        f"{counted(first['n_sequences'], 'sequence')} → {last['tokens_per_s']:.1f} with {last['n_sequences']} ({speedup:.1f}× for "
                        f"{growth:.0f}× the sequences; {per_sequence[0]:.1f} → {per_sequence[1]:.1f} tokens/s each): {why}"),
            "evidence": {"table": table, "sequences": by_batch["n_sequences"].to_list(), "tokens_per_s": by_batch["tokens_per_s"].to_list()},
        })
    return findings
