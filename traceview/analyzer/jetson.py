"""Jetson telemetry analysis: boards, EMC memory bandwidth and findings from tegrastats samples. Pure.

Bandwidth follows peers.md §3.6: EMC% / 100 × EMC MHz × 1e6 × 2 (DDR) × bus bytes. EMC% is relative to the
*current* EMC clock and counts every client of the memory controller (CPU, GPU, DLA, video), so it is an upper
bound on what the GPU moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceview.analyzer.devices import CLOCK_VARIANTS
from traceview.errors import UsageError
from traceview.numbers import reduced
from traceview.wording import counted

DDR = 2
INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "VIN")
OVERLAPPING_RAILS = ("VDDQ_VDD2_1V8AO",)


@dataclass(frozen=True)
class Board:
    key: str
    name: str
    bus_bytes: int  # memory bus width in bytes
    emc_max_mhz: float  # Orin prints its 3200 MHz maximum as "@3199"
    gpu_max_mhz: float
    source: str

    @property
    def peak_bytes_per_s(self) -> float:
        """Pin-rate DRAM bandwidth at the maximum EMC clock, bytes/s."""
        return self.emc_max_mhz * 1e6 * DDR * self.bus_bytes


BOARDS: tuple[Board, ...] = (
    Board("jetson-agx-orin-64gb", "Jetson AGX Orin 64GB", 32, 3200, 1300, "LPDDR5 256-bit, 204.8 GB/s (Jetson modules page)"),
    Board("jetson-agx-orin-32gb", "Jetson AGX Orin 32GB", 32, 3200, 930, "LPDDR5 256-bit, 204.8 GB/s"),
    Board("jetson-orin-nx-16gb", "Jetson Orin NX 16GB", 16, 3200, 918, "LPDDR5 128-bit, 102.4 GB/s"),
    # The GPU clocks of the NX modules are those before Super mode (JetPack 6.2's MAXN SUPER runs both at 1173 MHz): a
    # module at its old clocks is then not told that DVFS holds it down.
    Board("jetson-orin-nx-8gb", "Jetson Orin NX 8GB", 16, 3200, 765, "LPDDR5 128-bit, 102.4 GB/s"),
    Board("jetson-orin-nano-8gb", "Jetson Orin Nano 8GB (Super)", 16, 3200, 1020, "LPDDR5 128-bit, 102 GB/s with JetPack 6.1+ clocks"),
    # The same module before Super mode (JetPack 5 and early 6): memory at 2133 MHz, GPU at 625 MHz (datasheet).
    Board("jetson-orin-nano-8gb-pre-super", "Jetson Orin Nano 8GB (before Super mode)", 16, 2133, 625,
          "LPDDR5 128-bit, 68 GB/s at the clocks before Super mode"),
    Board("jetson-orin-nano-4gb", "Jetson Orin Nano 4GB (Super)", 8, 3200, 1020, "LPDDR5 64-bit, 51 GB/s with JetPack 6.1+ clocks"),
    Board("jetson-orin-nano-4gb-pre-super", "Jetson Orin Nano 4GB (before Super mode)", 8, 2133, 625,
          "LPDDR5 64-bit, 34 GB/s at the clocks before Super mode"),
    Board("jetson-agx-thor", "Jetson AGX Thor", 32, 4266, 1575, "LPDDR5X 256-bit, 273 GB/s"),
    Board("jetson-agx-xavier", "Jetson AGX Xavier", 32, 2133, 1377, "LPDDR4x 256-bit, 136.5 GB/s"),
    Board("jetson-xavier-nx", "Jetson Xavier NX", 16, 1600, 1100, "LPDDR4x 128-bit, 51.2 GB/s"),
    Board("jetson-tx2", "Jetson TX2", 16, 1866, 1300, "LPDDR4 128-bit, 59.7 GB/s"),
    Board("jetson-tx1", "Jetson TX1", 8, 1600, 998, "LPDDR4 64-bit, 25.6 GB/s"),
    Board("jetson-nano", "Jetson Nano 4GB", 8, 1600, 921, "LPDDR4 64-bit, 25.6 GB/s"),
)


ORIN_ZONES = {"cpu", "gpu", "tj", "soc0", "soc1", "soc2", "soc012", "soc345"}
PRE_SUPER_EMC_MHZ = 2200  # an Orin Nano's highest memory clock before Super mode is 2133 MHz; Super mode's is 3199
PRE_SUPER = {"jetson-orin-nano-8gb": "jetson-orin-nano-8gb-pre-super", "jetson-orin-nano-4gb": "jetson-orin-nano-4gb-pre-super"}
# The Orin Nano's CPU runs at 1510 MHz at most (1728 in Super mode), the Orin NX's at 1984: a faster core is an NX.
ORIN_NANO_MAX_CPU_MHZ = 1800


def find_board(name: str) -> Board:
    """Return the board for a --device value (`jetson-agx-orin-64gb`, `agx-orin-64gb`, `orin`...)."""
    wanted = name.strip().lower().replace("_", "-").replace(" ", "-")
    for board in BOARDS:
        if wanted in (board.key, board.key.removeprefix("jetson-")):
            return board
    # `orin-nano-8gb` names the module; its pre-Super board is a variant of it, chosen by key or from a log's clocks.
    matches = [b for b in BOARDS if wanted in b.key and b.key not in CLOCK_VARIANTS] or [b for b in BOARDS if wanted in b.key]
    if len(matches) == 1:
        return matches[0]
    if matches:  # `orin-nano` is a 4 GB module at 51 GB/s and an 8 GB one at 102: never guessed
        raise UsageError(f"--device {name!r} fits several Jetson boards: {', '.join(b.key for b in matches)} — give one of them")
    raise UsageError(f"unknown Jetson board {name!r} — choose one of: {', '.join(b.key for b in BOARDS)}")


def infer_board(samples: pl.DataFrame) -> tuple[Board | None, str]:
    """Return the board the log most likely came from and why (RAM size, core count, rail and sensor names)."""
    if samples.height == 0:
        return None, "no samples"
    ram = reduced(samples["ram_total_mb"].median())
    cores = reduced(samples["cpu_load_pct"].list.len().max())
    rails = set(samples["rails"].explode().struct.field("name").drop_nulls().unique().to_list())
    temps = set(samples["temperatures"].explode().struct.field("name").drop_nulls().unique().to_list())
    # Orin and Thor name their thermal zones in lower case (cpu, gpu, tj, soc0); every older board prints upper-case
    # zones (AO, GPU, CPU) beside a lower-case `thermal`, and only the Xavier modules have AUX. Xavier's rails are
    # GPU/CPU/SOC/CV/VDDRQ on JetPack 4's AGX, VDD_CPU_GPU_CV (as on an Orin NX or Nano) on the NX.
    orin = bool(temps & ORIN_ZONES) and all(t == t.lower() for t in temps)
    xavier = "AUX" in temps or {"GPU", "CPU", "SOC"} <= rails or "VDDRQ" in rails
    why = f"{ram:.0f} MB RAM, {cores:.0f} CPU cores" if ram is not None and cores is not None else ""
    caveat = ""
    guess: str | None = None
    if ram is None:
        return None, "no RAM total in the log"
    if 60000 <= ram <= 65000 and cores == 12:
        guess = "jetson-agx-orin-64gb"
    elif (15000 <= ram <= 16500 or 29000 <= ram <= 33000 or 60000 <= ram <= 65000) and cores == 8 and xavier:
        guess = "jetson-agx-xavier"  # 16, 32 and 64 GB modules, one memory bus
    elif 29000 <= ram <= 33000 and cores == 8 and orin:
        guess = "jetson-agx-orin-32gb"
    elif 15000 <= ram <= 16500 and cores == 8 and orin:
        guess = "jetson-orin-nx-16gb"
    elif 6500 <= ram <= 7900 and cores == 6 and xavier and "VDD_CPU_GPU_CV" in rails:
        guess = "jetson-xavier-nx"  # 6834 MB on JetPack 5, 7771 MB on JetPack 4
    elif 7700 <= ram <= 7900 and cores == 6 and ({"BCPU", "MCPU"} & temps):
        guess = "jetson-tx2"
    elif 7000 <= ram <= 7900 and cores == 6 and orin:
        fastest_core = reduced(samples["cpu_mhz"].explode().max())
        if fastest_core is not None and fastest_core > ORIN_NANO_MAX_CPU_MHZ:
            guess, why = "jetson-orin-nx-8gb", f"{why}, a core at {fastest_core:.0f} MHz"
        else:
            guess = "jetson-orin-nano-8gb"
            # Same bandwidth; what differs is the GPU's top clock, against which a held-down clock is judged.
            caveat = (f"; an Orin NX 8GB whose cores stay under {ORIN_NANO_MAX_CPU_MHZ} MHz looks the same in a log "
                      "(pass --device jetson-orin-nx-8gb if it is one)")
    elif 3000 <= ram <= 3800 and cores == 6 and orin:
        guess = "jetson-orin-nano-4gb"
    elif 120000 <= ram <= 131072:  # 128 GB: only AGX Thor among the boards that run tegrastats
        guess = "jetson-agx-thor"
    elif 3900 <= ram <= 4000 and cores == 4:
        guess = "jetson-nano" if ({"POM_5V_IN"} & rails or not rails) and ram < 3980 else "jetson-tx1"
    if guess is None:
        return None, f"{why}: no unambiguous match; name the board with --device"
    if samples["ram_total_mb"].n_unique() > 1:
        return None, "the log mixes samples from different boards (RAM totals differ); name the board with --device"
    inferred = f"inferred from the log ({why}{', ' + ', '.join(sorted(rails)[:3]) if rails else ''}){caveat}"
    emc = samples["emc_mhz"].drop_nulls()
    if guess in PRE_SUPER and emc.len() and float(emc.max()) <= PRE_SUPER_EMC_MHZ:  # type: ignore[arg-type]
        # An Orin Nano whose memory never ran above 2133 MHz has the clocks of before Super mode (68 GB/s, not 102, on
        # the 8 GB module): its firmware predates JetPack 6.2's MAXN SUPER, or a lower power mode caps it just as much.
        before, super_mode = find_board(PRE_SUPER[guess]), find_board(guess)
        return before, (
            f"{inferred}; its memory clock never went above {float(emc.max()):.0f} MHz (the 2133 MHz of the clocks before Super mode: "  # type: ignore[arg-type]
            f"{before.peak_bytes_per_s / 1e9:.0f} GB/s; Super mode, JetPack 6.2's MAXN SUPER, runs it at 3200 MHz for "
            f"{super_mode.peak_bytes_per_s / 1e9:.0f} GB/s — pass --device {guess} for that peak)")
    return find_board(guess), inferred


def with_bandwidth(samples: pl.DataFrame, board: Board | None) -> pl.DataFrame:
    """Add emc_bytes_per_s (EMC% × clock × 2 × bus), gpu busy %, board input power (mW) and mean CPU load (%)."""
    bus = board.bus_bytes if board else None
    rails = pl.col("rails")
    # Boards with a true input rail (VDD_IN on TX1/TX2/Xavier NX/Orin NX, POM_5V_IN on Nano) report it; AGX Orin
    # and AGX Xavier split the module into rails that add up, except VDDQ_VDD2_1V8AO, which VIN_SYS_5V0 contains.
    input_power = rails.list.eval(
        pl.element().filter(pl.element().struct.field("name").cast(pl.String).is_in(list(INPUT_RAILS))).struct.field("current_mw")
    ).list.first()
    summed_power = rails.list.eval(
        pl.element().filter(~pl.element().struct.field("name").cast(pl.String).is_in(list(OVERLAPPING_RAILS))).struct.field("current_mw")
    ).list.sum()
    return samples.with_columns(
        (pl.col("emc_pct") / 100 * pl.col("emc_mhz") * 1e6 * DDR * bus).alias("emc_bytes_per_s")
        if bus
        else pl.lit(None, dtype=pl.Float64).alias("emc_bytes_per_s"),
        pl.when(input_power.is_not_null()).then(input_power).otherwise(
            pl.when(rails.list.len() > 0).then(summed_power)
        ).alias("board_power_mw"),
        pl.col("cpu_load_pct").list.mean().alias("cpu_mean_pct"),
        # PMIC reads a fixed 50 or 100 °C on TX1/TX2/Nano, and -256 °C marks a power-gated zone: neither is heat.
        pl.col("temperatures").list.eval(
            pl.element().struct.field("celsius").filter(
                (pl.element().struct.field("celsius") > -200)
                & (pl.element().struct.field("name").cast(pl.String).str.to_uppercase() != "PMIC")
            )
        ).list.max().alias("max_temp_c"),
    )


@dataclass(frozen=True)
class Finding:
    """One observation with its evidence: when (s from start), for how long (s), how much."""

    kind: str
    message: str
    start_s: float | None = None
    duration_s: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


def _stretches(frame: pl.DataFrame, condition: pl.Expr, min_samples: int) -> list[tuple[int, int]]:
    """Return [first, last] row index pairs of runs of consecutive rows where condition holds, min_samples long."""
    flags = frame.select(condition.fill_null(False).alias("c"))["c"].to_list()
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for index, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            if index - start >= min_samples:
                runs.append((start, index - 1))
            start = None
    return runs


def _span(frame: pl.DataFrame, first: int, last: int, interval_s: float) -> tuple[float, float]:
    times = frame["time_s"]
    return float(times[first]), float(times[last] - times[first] + interval_s)


def _stats(series: pl.Series) -> dict[str, float] | None:
    values = series.drop_nulls()
    if values.len() == 0:
        return None
    return {
        "mean": float(values.mean()),  # type: ignore[arg-type]
        "p50": float(values.quantile(0.5)),  # type: ignore[arg-type]
        "p90": float(values.quantile(0.9)),  # type: ignore[arg-type]
        "p99": float(values.quantile(0.99)),  # type: ignore[arg-type]
        "max": float(values.max()),  # type: ignore[arg-type]
    }


@dataclass(frozen=True)
class Telemetry:
    """The summary of a tegrastats log: counts, bandwidth and GPU statistics, findings."""

    board: Board | None
    board_identified: str
    samples: int
    duration_s: float
    interval_s: float
    stray_lines: int
    stray_examples: list[tuple[int, str]]
    bandwidth_gb_s: dict[str, float] | None
    bandwidth_pct_of_peak: dict[str, float] | None
    gpu_pct: dict[str, float] | None
    emc_samples: int
    mean_power_w: float | None
    energy_j: float | None
    energy_per_token_j: float | None
    findings: list[Finding]
    frame: pl.DataFrame  # the samples with derived columns


def analyze_telemetry(
    samples: pl.DataFrame,
    interval_s: float = 1.0,
    board: Board | None = None,
    tokens: int | None = None,
    stray_lines: int = 0,
    stray_examples: list[tuple[int, str]] | None = None,
) -> Telemetry:
    """Return the telemetry summary and findings for parsed tegrastats samples (TELEMETRY schema)."""
    if board is not None:
        identified = "named with --device"
    else:
        board, identified = infer_board(samples)
    frame = with_bandwidth(samples, board)
    duration = (reduced(frame["time_s"].max()) or 0.0) - (reduced(frame["time_s"].min()) or 0.0) + interval_s if frame.height else 0.0
    findings: list[Finding] = []
    bandwidth = frame["emc_bytes_per_s"]
    bw_stats = _stats(bandwidth / 1e9)
    pct_stats = _stats(bandwidth / board.peak_bytes_per_s * 100) if board and bw_stats else None
    emc_samples = int(frame["emc_mhz"].is_not_null().sum())

    if emc_samples == 0 and frame["emc_pct"].is_not_null().any():
        findings.append(Finding("no_emc_clock", "EMC_FREQ has no clock (tegrastats ran without root): memory bandwidth cannot be computed — run `sudo tegrastats`",
                                evidence={"samples_without_clock": frame.height}))
    elif emc_samples and frame["emc_pct"].is_null().all():
        # JetPack 7 on Thor prints `EMC_FREQ @4266`: the clock alone, no share of it in use.
        findings.append(Finding("no_emc_utilisation", "EMC_FREQ gives the memory clock but no utilisation (`EMC_FREQ @MHz`, as JetPack 7 prints it on "
                                "Thor): memory bandwidth cannot be computed from this log",
                                evidence={"samples_without_utilisation": frame.height}))
    elif 0 < emc_samples < frame.height:
        first_line = frame.filter(pl.col("emc_mhz").is_not_null())["line_number"][0]
        findings.append(Finding("format_change", f"EMC readings start at line {first_line} ({emc_samples} of {counted(frame.height, 'sample')}): the log format changed mid-file (e.g. tegrastats restarted as root)",
                                evidence={"first_line_with_emc": int(first_line)}))

    if board is not None:
        findings += _clock_findings(frame, board, interval_s)
        if bw_stats:
            findings += _memory_bound_findings(frame, board, interval_s)
    if frame["gpu_pct"].is_null().all() and frame["gpu_mhz"].is_not_null().any():
        findings.append(Finding("no_gpu_utilisation", "GR3D_FREQ gives GPU clocks but no utilisation (`GR3D_FREQ @[MHz,…]`, as JetPack 7 prints it on "
                                "Thor): GPU busy % is unknown; jtop or nvidia-smi report it",
                                evidence={"samples_without_utilisation": frame.height}))
    findings += _thermal_findings(frame, interval_s)
    findings += _gpu_idle_findings(frame, interval_s)

    power = frame["board_power_mw"].drop_nulls()
    mean_power_w = float(power.mean()) / 1000 if power.len() else None  # type: ignore[arg-type]
    energy_j = mean_power_w * duration if mean_power_w is not None else None
    per_token = energy_j / tokens if energy_j is not None and tokens else None
    if mean_power_w is not None:
        message = f"board input power averaged {mean_power_w:.2f} W over {duration:.0f} s ({energy_j:.0f} J)"
        if per_token is not None:
            message += f"; {per_token:.3f} J per token over {counted(tokens, 'token')}"
        findings.append(Finding("energy", message, 0.0, duration, {"mean_power_w": mean_power_w, "energy_j": energy_j, "energy_per_token_j": per_token}))
    return Telemetry(
        board, identified, frame.height, duration, interval_s, stray_lines, stray_examples or [], bw_stats, pct_stats,
        _stats(frame["gpu_pct"]), emc_samples, mean_power_w, energy_j, per_token, findings, frame,
    )


# A memory controller this busy at a low clock is held back by the clock; less busy, DVFS keeps the clock low because
# nothing asks for more bandwidth, which is not a finding.
EMC_BUSY_PCT = 50


def _clock_findings(frame: pl.DataFrame, board: Board, interval_s: float) -> list[Finding]:
    found = []
    loaded = frame.filter(pl.col("emc_pct") >= EMC_BUSY_PCT)
    emc = loaded["emc_mhz"].drop_nulls()
    if emc.len() and float(emc.max()) < 0.9 * board.emc_max_mhz:  # type: ignore[arg-type]
        top = float(emc.max())  # type: ignore[arg-type]
        found.append(Finding(
            "emc_clock_low",
            f"while the memory controller was busy (≥ {EMC_BUSY_PCT}%, {counted(loaded.height, 'sample')}) its clock stayed at or below {top:.0f} MHz, "
            f"{100 * top / board.emc_max_mhz:.0f}% of the {board.name}'s {board.emc_max_mhz:.0f} MHz: a low power mode or memory DVFS caps "
            f"bandwidth at {top * 1e6 * DDR * board.bus_bytes / 1e9:.1f} GB/s — `sudo nvpmodel -m 0 && sudo jetson_clocks` pins it to the maximum",
            reduced(loaded["time_s"].min()), (reduced(loaded["time_s"].max()) or 0.0) - (reduced(loaded["time_s"].min()) or 0.0) + interval_s,
            {"max_emc_mhz": top, "board_max_emc_mhz": board.emc_max_mhz, "busy_samples": loaded.height},
        ))
    busy = frame.filter(pl.col("gpu_pct") >= 50)
    gpu = busy["gpu_mhz"].drop_nulls()
    if gpu.len() and float(gpu.max()) < 0.9 * board.gpu_max_mhz:  # type: ignore[arg-type]
        top = float(gpu.max())  # type: ignore[arg-type]
        found.append(Finding(
            "gpu_clock_low",
            f"while the GPU was busy (≥ 50%, {counted(busy.height, 'sample')}) its clock stayed at or below {top:.0f} MHz, {100 * top / board.gpu_max_mhz:.0f}% of the {board.gpu_max_mhz:.0f} MHz maximum: power mode or DVFS — try `sudo jetson_clocks`",
            evidence={"max_gpu_mhz_while_busy": top, "board_max_gpu_mhz": board.gpu_max_mhz, "busy_samples": busy.height},
        ))
    return found


def _memory_bound_findings(frame: pl.DataFrame, board: Board, interval_s: float) -> list[Finding]:
    condition = (pl.col("emc_pct") >= 60) & (pl.col("gpu_pct").is_null() | (pl.col("gpu_pct") < 90))
    found = []
    for first, last in _stretches(frame, condition, min_samples=3)[:5]:
        start, length = _span(frame, first, last, interval_s)
        part = frame.slice(first, last - first + 1)
        bw = (reduced(part["emc_bytes_per_s"].mean()) or 0.0) / 1e9
        found.append(Finding(
            "memory_bound",
            f"memory-bound stretch: EMC {reduced(part['emc_pct'].mean()) or 0.0:.0f}% busy ({bw:.1f} GB/s, {100 * bw * 1e9 / board.peak_bytes_per_s:.0f}% of {board.peak_bytes_per_s / 1e9:.1f} GB/s) while the GPU was {reduced(part['gpu_pct'].mean()) or 0.0:.0f}% busy",
            start, length, {"mean_emc_pct": reduced(part["emc_pct"].mean()), "mean_bandwidth_gb_s": bw},
        ))
    return found


THERMAL_WARNING_C = 85.0


def _thermal_findings(frame: pl.DataFrame, interval_s: float) -> list[Finding]:
    hot = _stretches(frame, pl.col("max_temp_c") >= THERMAL_WARNING_C, min_samples=1)
    if not hot:
        return []
    first, last = hot[0][0], hot[-1][1]
    peak = float(frame["max_temp_c"].max())  # type: ignore[arg-type]
    start, _ = _span(frame, first, first, interval_s)
    return [Finding(
        "thermal",
        f"a sensor reached {peak:.1f} °C (≥ {THERMAL_WARNING_C:.0f} °C) in {counted(sum(b - a + 1 for a, b in hot), 'sample')}: Jetson clocks throttle near 95-100 °C — check cooling and whether clocks dropped",
        start, float(frame["time_s"][last] - frame["time_s"][first] + interval_s), {"max_temp_c": peak},
    )]


def _gpu_idle_findings(frame: pl.DataFrame, interval_s: float) -> list[Finding]:
    condition = (pl.col("gpu_pct") < 10) & (pl.col("cpu_mean_pct") >= 70)
    runs = _stretches(frame, condition, min_samples=3)
    if not runs:
        return []
    total = sum(_span(frame, a, b, interval_s)[1] for a, b in runs)
    start, length = _span(frame, *runs[0], interval_s)
    return [Finding(
        "gpu_idle_cpu_busy",
        f"GPU idle (< 10%) while the CPU was busy (≥ 70% mean over cores) for {total:.0f} s in {len(runs)} stretch(es), first at {start:.0f} s for {length:.0f} s: "
        "work is CPU-bound (pre/post-processing, tokenization, a CPU fallback)",
        start, total, {"stretches": len(runs)},
    )]


GPU_ACTIVE_PCT = 10.0


def active_bandwidth(telemetry: Telemetry) -> tuple[int, float | None, float | None]:
    """Return (samples, mean and p90 EMC bytes/s) over the samples where the GPU was busy (≥ 10 %), the decode
    window of a log; all samples where the log has no GPU load. Bandwidths are None without EMC clocks."""
    frame = telemetry.frame
    active = frame.filter(pl.col("gpu_pct") >= GPU_ACTIVE_PCT) if frame["gpu_pct"].drop_nulls().len() else frame
    bandwidth = active["emc_bytes_per_s"].drop_nulls()
    if bandwidth.len() == 0:
        return active.height, None, None
    return active.height, float(bandwidth.mean()), float(bandwidth.quantile(0.9))  # type: ignore[arg-type]
