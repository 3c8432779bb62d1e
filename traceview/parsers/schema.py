"""Fixed polars schemas that every parser's output satisfies; units are in the column names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

PRECISIONS = ("fp64", "fp32", "fp16", "tensor")
MEMORY_LEVELS = ("dram", "l2", "l1")

NCU_RULE = pl.Struct(
    {
        "section": pl.String,
        "name": pl.String,
        "type": pl.String,
        "message": pl.String,
        "speedup_type": pl.String,
        "speedup_pct": pl.Float64,
    }
)

def schema_of(columns: Mapping[str, Any]) -> pl.Schema:
    """A polars Schema of column → dtype (polars' stubs cannot type a mapping that mixes dtype classes and instances)."""
    return pl.Schema(columns)


STALL = pl.Struct({"reason": pl.String, "value": pl.Float64})

# One row per profiled kernel launch (Nsight Compute). Everything but identity columns may be null:
# which metrics exist depends on the sections collected and on the ncu version.
KERNELS = schema_of(
    {
        "launch_id": pl.Int64,
        "process_id": pl.Int64,
        "process_name": pl.String,
        "kernel_name": pl.String,
        "short_name": pl.String,
        "grid_size": pl.String,
        "block_size": pl.String,
        "context_id": pl.Int64,
        "stream_id": pl.Int64,
        "device_index": pl.Int64,
        "device_name": pl.String,
        "compute_capability": pl.String,
        "sm_count": pl.Int64,
        "duration_ns": pl.Float64,
        "sm_clock_hz": pl.Float64,
        "dram_clock_hz": pl.Float64,
        # Speed-of-light throughputs, % of peak sustained (ncu's SOL section).
        "sm_throughput_pct": pl.Float64,
        "memory_throughput_pct": pl.Float64,
        "dram_throughput_pct": pl.Float64,
        "l2_throughput_pct": pl.Float64,
        "l1_throughput_pct": pl.Float64,
        "waves_per_sm": pl.Float64,
        # Work done (FLOP; tensor = ncu's sm__ops_path_tensor ops) and traffic per memory level (bytes).
        **{f"{p}_flop": pl.Float64 for p in PRECISIONS},
        "tensor_dtype": pl.String,
        **{f"{m}_bytes": pl.Float64 for m in MEMORY_LEVELS},
        # Achieved rates; filled from counts and duration, or read directly where only rates exist.
        **{f"{p}_flop_per_s": pl.Float64 for p in PRECISIONS},
        **{f"{m}_bytes_per_s": pl.Float64 for m in MEMORY_LEVELS},
        # Peaks measured by the profiler itself (peak per cycle × measured clock); null when absent.
        **{f"peak_{p}_flop_per_s": pl.Float64 for p in PRECISIONS},
        **{f"peak_{m}_bytes_per_s": pl.Float64 for m in MEMORY_LEVELS},
        # Launch configuration and occupancy (Launch Statistics and Occupancy sections, or their launch__/sm__ metrics).
        "registers_per_thread": pl.Float64,
        "shared_bytes_per_block": pl.Float64,  # static + dynamic, as the kernel asks for it
        "threads": pl.Float64,
        "block_limit_sm": pl.Float64,  # blocks per SM the hardware allows at most
        "block_limit_registers": pl.Float64,
        "block_limit_shared_mem": pl.Float64,
        "block_limit_warps": pl.Float64,
        "block_limit_barriers": pl.Float64,
        "theoretical_occupancy_pct": pl.Float64,
        "achieved_occupancy_pct": pl.Float64,
        "theoretical_warps_per_sm": pl.Float64,
        "achieved_warps_per_sm": pl.Float64,
        # Warp stall reasons: cycles per issued instruction (WarpStateStats) or PC-sample counts (SourceCounters),
        # whichever the export has, named by stall_unit; `selected` is the issuing state, not a stall.
        "warp_cycles_per_issue": pl.Float64,
        "stalls": pl.List(STALL),
        "stall_unit": pl.String,
        # Tensor cores: pipe utilisation (% of peak) and instructions executed on the tensor pipe.
        "tensor_pipe_pct": pl.Float64,
        "tensor_inst": pl.Float64,
        "ncu_rules": pl.List(NCU_RULE),
        # True when every metric cell of the launch is nan or empty: it failed under profiling (`==ERROR== LaunchFailed`).
        "launch_failed": pl.Boolean,
    }
)


def conform(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """Return frame with exactly the schema's columns, in order and type; missing columns are null, and so are values
    the type cannot hold (1e23 SMs in a damaged export): a quantity the input cannot give is null, never a guess."""
    columns = [
        (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype, strict=False).alias(name)
        for name, dtype in schema.items()
    ]
    return frame.select(columns)


def widened(schema: pl.Schema) -> pl.Schema:
    """Return the schema with every integer column 64-bit and every categorical a string: the types to build a frame
    of Python values in, before conform() narrows them (a value out of a narrow type's range is then null, where
    building in the narrow type would fail)."""
    return pl.Schema({name: pl.Int64 if dtype.is_integer() else pl.String if dtype == pl.Categorical else dtype for name, dtype in schema.items()})


# Sensor and rail names repeat on every sample: categorical keeps a day-long log small.
TEMPERATURE = pl.Struct({"name": pl.Categorical, "celsius": pl.Float64})
RAIL = pl.Struct({"name": pl.Categorical, "current_mw": pl.Float64, "average_mw": pl.Float64, "max_mw": pl.Float64})

# One row per tegrastats sample. Per-core, per-GPC, temperature and rail lists vary by board, so they are lists.
TELEMETRY = schema_of(
    {
        "sample": pl.Int64,
        "line_number": pl.Int64,
        "timestamp": pl.Datetime("ms"),  # null when the log has no timestamp prefix
        "time_s": pl.Float64,  # from the timestamps, else sample index × --interval
        "ram_used_mb": pl.Float64,
        "ram_total_mb": pl.Float64,
        "swap_used_mb": pl.Float64,
        "swap_total_mb": pl.Float64,
        "cpu_load_pct": pl.List(pl.Float64),  # null entry = core off
        "cpu_mhz": pl.List(pl.Float64),
        "emc_pct": pl.Float64,  # memory controller utilisation at the current EMC clock; null without root
        "emc_mhz": pl.Float64,
        "gpu_pct": pl.Float64,  # GR3D utilisation
        "gpu_mhz_per_gpc": pl.List(pl.Float64),
        "gpu_mhz": pl.Float64,  # the highest GPC clock
        "temperatures": pl.List(TEMPERATURE),
        "rails": pl.List(RAIL),
    }
)


# One row per llama.cpp measurement: a llama-bench row, or the prefill / decode part of a run's timing lines.
LLAMA_RUNS = schema_of(
    {
        "format": pl.String,  # llama-bench-md/-csv/-json/-jsonl/-sql/-sqlite, llama-batched-bench(-jsonl), llama-sweep-bench, llama-timings
        "run": pl.Int64,
        "table": pl.Int64,  # which table (bench md) or run (timings) in the file
        "line_number": pl.Int64,
        "model": pl.String,
        "model_size_bytes": pl.Float64,
        "model_params": pl.Float64,
        "backend": pl.String,
        "n_gpu_layers": pl.Int64,
        "test": pl.String,  # pp512, tg128, pp512+tg128, tg128@d4096
        "phase": pl.String,  # prefill, decode, mixed
        "n_prompt": pl.Int64,
        "n_gen": pl.Int64,
        "n_depth": pl.Int64,  # tokens already in the KV cache when the test ran (llama-bench -d; `pp512 @ d4096`), 0 if none
        "n_sequences": pl.Int64,  # sequences run together (llama-batched-bench B): one read of the weights serves each of them
        "draft_accepted": pl.Int64,  # speculative decoding: drafted tokens the model accepted (llama-server's `draft acceptance`)
        "draft_generated": pl.Int64,  # and drafted in all
        # llama-speculative's draft and target timing blocks: the draft model generating its tokens, and the target
        # verifying the prompt and every draft (its `prompt eval`).
        "draft_eval_ms": pl.Float64,
        "draft_eval_tokens": pl.Int64,
        "verify_ms": pl.Float64,
        "verify_tokens": pl.Int64,
        "duration_ms": pl.Float64,
        "tokens_per_s": pl.Float64,
        "tokens_per_s_stddev": pl.Float64,
        "device_name": pl.String,
        "compute_capability": pl.String,
        "cpu_info": pl.String,
        "build": pl.String,
        "options": pl.String,  # other columns as k=v; ...
    }
)
