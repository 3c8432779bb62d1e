"""tegrastats parsing on every real log (counts and values read from the files by hand) and the findings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.analyzer.analysis import Source, analyze_samples
from traceview.analyzer.jetson import find_board
from traceview.app.cli import app
from traceview.errors import TraceFormatError, UsageError
from traceview.parsers import TraceFormat, detect_format, load_trace
from traceview.parsers.schema import TELEMETRY

# file: (samples, stray non-blank lines, blank lines)
COUNTS = {
    "agx_orin64_jp6_ts_Hanner123_a.log": (15, 0, 0),
    "agx_orin64_jp7.2_r39.2_single_line_from_jetson_stats_test.txt": (1, 0, 0),
    "mixed_tx2_tx1_xavier_oneline_each_ssaraff98.txt": (4, 1, 0),
    "nano_pom5v_iram_csc2231.txt": (114, 0, 0),
    "tx2_l4t28_gr3d_at0_shellprompt_putmotorsport.log": (2, 2, 1),
    "tx2_l4t32_vddsys_dateheader_ssaraff98.txt": (432, 1, 0),
    "tx2_nosudo_vddin_plain_log_project.log": (600, 0, 0),
    "xavier_nx_jp5_nosudo_ts_tegra_burn.log": (103, 0, 0),
    "xavier_nx_jp5_sudo_ts_tegra_burn.log": (2, 0, 0),
}


def load(realdata_file, name):
    trace = load_trace(realdata_file(f"tegrastats/{name}"))
    return trace.data.samples, trace.data.report


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_every_log_parses_with_every_line_accounted_for(realdata_file, name):
    samples, skipped = load(realdata_file, name)
    count, stray, blank = COUNTS[name]
    assert detect_format(realdata_file(f"tegrastats/{name}")) == TraceFormat.TEGRASTATS
    assert dict(samples.schema) == dict(TELEMETRY)  # Schema == compares categorical dtypes by identity
    assert samples.height == count
    assert (skipped.stray_lines, skipped.blank_lines) == (stray, blank)
    assert skipped.total_lines == count + stray + blank


def rails(row):
    return {r["name"]: (r["current_mw"], r["average_mw"], r["max_mw"]) for r in row["rails"]}


def temps(row):
    return {t["name"]: t["celsius"] for t in row["temperatures"]}


def test_orin_jetpack6_values(realdata_file):
    samples, _ = load(realdata_file, "agx_orin64_jp6_ts_Hanner123_a.log")
    row = samples.row(0, named=True)
    assert (row["ram_used_mb"], row["ram_total_mb"], row["swap_total_mb"]) == (17953, 62841, 31420)
    assert (row["emc_pct"], row["emc_mhz"]) == (12, 204)
    assert (row["gpu_pct"], row["gpu_mhz_per_gpc"], row["gpu_mhz"]) == (39, [305, 0], 305)
    assert row["cpu_load_pct"][:2] == [7, 31] and row["cpu_load_pct"][8:] == [None] * 4  # 4 cores off
    assert rails(row)["VDD_GPU_SOC"] == (2798, 2798, None)
    assert temps(row)["cpu"] == 43.906 and temps(row)["tj"] == 43.906
    assert str(row["timestamp"]) == "2025-07-21 16:33:42"
    assert samples["time_s"].to_list()[:3] == [0.0, 1.0, 2.0]


def test_orin_jetpack7_three_value_rails_and_two_value_temperatures(realdata_file):
    row = load(realdata_file, "agx_orin64_jp7.2_r39.2_single_line_from_jetson_stats_test.txt")[0].row(0, named=True)
    assert row["swap_total_mb"] is None
    assert (row["emc_pct"], row["emc_mhz"], row["gpu_pct"], row["gpu_mhz_per_gpc"]) == (3, 3199, 12, [1300, 1300])
    assert rails(row)["VIN_SYS_5V0"] == (5500, 5500, 5500)
    assert temps(row)["cpu"] == 52.968
    assert len(row["cpu_load_pct"]) == 12


def test_tx2_root_fields_appear_at_line_421(realdata_file):
    samples, _ = load(realdata_file, "tx2_nosudo_vddin_plain_log_project.log")
    assert samples.filter(samples["emc_mhz"].is_not_null())["line_number"].min() == 421
    assert samples["emc_mhz"].is_not_null().sum() == 180
    row = samples.filter(samples["line_number"] == 421).row(0, named=True)
    assert (row["emc_pct"], row["emc_mhz"], row["gpu_pct"], row["gpu_mhz"]) == (7, 1600, 18, 1134)
    assert rails(row)["VDD_IN"] == (3717, 3717, None)  # mW without the unit


def test_tx2_gpu_frequency_without_percent(realdata_file):
    row = load(realdata_file, "tx2_l4t28_gr3d_at0_shellprompt_putmotorsport.log")[0].row(0, named=True)
    assert row["gpu_pct"] is None and row["gpu_mhz"] == 0
    assert row["cpu_load_pct"] == [48, None, None, 53, 43, 41]


def test_nano_and_xavier_variants(realdata_file):
    nano = load(realdata_file, "nano_pom5v_iram_csc2231.txt")[0].row(0, named=True)
    assert (nano["emc_pct"], nano["emc_mhz"], nano["gpu_pct"], nano["gpu_mhz"]) == (0, 204, 0, 76)
    assert rails(nano)["POM_5V_IN"] == (920, 920, None)
    nx = load(realdata_file, "xavier_nx_jp5_nosudo_ts_tegra_burn.log")[0].row(0, named=True)
    assert (nx["emc_pct"], nx["emc_mhz"], nx["gpu_pct"]) == (0, None, 22)
    assert rails(nx)["VDD_IN"] == (5542, 5542, None)
    nx_root = load(realdata_file, "xavier_nx_jp5_sudo_ts_tegra_burn.log")[0].row(0, named=True)
    assert (nx_root["emc_mhz"], nx_root["gpu_mhz_per_gpc"]) == (1600, [114])
    xavier = load(realdata_file, "mixed_tx2_tx1_xavier_oneline_each_ssaraff98.txt")[0].row(3, named=True)
    assert rails(xavier)["SYS5V"] == (1889, 1889, None) and rails(xavier)["GPU"] == (0, 0, None)


def test_date_header_gives_timestamps(realdata_file):
    samples, skipped = load(realdata_file, "tx2_l4t32_vddsys_dateheader_ssaraff98.txt")
    assert skipped.stray_examples == [(1, "Tue Jan 26 18:22:31 UTC 2021")]
    assert str(samples["timestamp"][0]) == "2021-01-26 18:22:31"


def run(realdata_file, name, **kwargs):
    trace = load_trace(realdata_file(f"tegrastats/{name}"))
    return analyze_samples(trace.data.samples, Source(name, "tegrastats", "", 0), **kwargs).telemetry


def kinds(telemetry):
    return [f.kind for f in telemetry.findings]


def test_board_inference(realdata_file):
    assert run(realdata_file, "agx_orin64_jp6_ts_Hanner123_a.log").board.key == "jetson-agx-orin-64gb"
    assert run(realdata_file, "nano_pom5v_iram_csc2231.txt").board.key == "jetson-nano"
    assert run(realdata_file, "xavier_nx_jp5_sudo_ts_tegra_burn.log").board.key == "jetson-xavier-nx"
    assert run(realdata_file, "tx2_l4t32_vddsys_dateheader_ssaraff98.txt").board.key == "jetson-tx2"
    mixed = run(realdata_file, "mixed_tx2_tx1_xavier_oneline_each_ssaraff98.txt")
    assert mixed.board is None and "--device" in mixed.board_identified


FOUND = Path(__file__).parent / "fixtures" / "found"


def telemetry_of(path):
    return analyze_samples(load_trace(path).data.samples, Source(path.name, "tegrastats", "", 0)).telemetry


def test_xavier_and_orin_are_told_apart_by_their_thermal_zones_not_by_a_lower_case_one():
    # Real lines (tests/fixtures/found/PROVENANCE.md). Every board before Orin prints a lower-case `thermal@` zone
    # beside upper-case ones; Orin's are all lower case. An AGX Xavier 32 GB shares its RAM size and core count with
    # an AGX Orin 32 GB, and a Xavier NX on JetPack 4 (7,771 MB) those of an Orin Nano.
    xavier = telemetry_of(FOUND / "tegrastats_agx_xavier_jp4_one_line.log")
    assert xavier.board.key == "jetson-agx-xavier"
    # 2133 MHz is the AGX Xavier's highest memory clock: no finding that DVFS held it down.
    assert not any("memory clock" in f.message or "memory controller" in f.message for f in xavier.findings)
    assert telemetry_of(FOUND / "tegrastats_xavier_nx_jp4_one_line.log").board.key == "jetson-xavier-nx"
    assert telemetry_of(FOUND / "tegrastats_orin_nano_jetson_clocks_nonroot.log").board.key == "jetson-orin-nano-8gb"


def orin_nano_log(tmp_path, emc_mhz, gpu_mhz):
    """An Orin Nano 8GB log in JetPack 6's grammar (7620 MB, six cores, lower-case sensors, the real line of a public
    test suite) with the memory controller 60-79% busy at the given clocks."""
    line = ("08-10-2026 21:39:{s:02d} RAM 2513/7620MB (lfb 1x4MB) SWAP 25/3810MB (cached 0MB) CPU [11%@1510,7%@1510,8%@1510,4%@1510,3%@1510,14%@1510] "
            "EMC_FREQ {e}%@{c} GR3D_FREQ 97%@[{g}] cpu@51.218C soc2@51.093C soc0@50.125C gpu@51.593C tj@51.718C soc1@50.343C VDD_IN 4744mW/6179mW "
            "VDD_CPU_GPU_CV 1273mW/2369mW VDD_SOC 1234mW/1392mW")
    path = tmp_path / f"orin_nano_{emc_mhz}.log"
    path.write_text("\n".join(line.format(s=i, e=60 + i, c=emc_mhz, g=gpu_mhz) for i in range(20)) + "\n")
    return path


def test_an_orin_nano_at_the_clocks_before_super_mode_is_measured_against_68_gb_s(tmp_path):
    # Super mode (JetPack 6.2) raised the Orin Nano's memory clock from 2133 to 3200 MHz: 68 → 102 GB/s. A log whose
    # memory never runs above 2133 MHz had been measured against 102 GB/s and told to run jetson_clocks.
    before = analyze_samples(load_trace(orin_nano_log(tmp_path, 2133, 624)).data.samples, Source("n", "tegrastats", "", 0))
    assert before.telemetry.board.key == "jetson-orin-nano-8gb-pre-super"
    assert before.telemetry.board.peak_bytes_per_s == pytest.approx(2133e6 * 2 * 16)
    assert "never went above 2133 MHz" in before.telemetry.board_identified and "--device jetson-orin-nano-8gb" in before.telemetry.board_identified
    assert "emc_clock_low" not in kinds(before.telemetry)
    assert before.device.spec.key == "jetson-orin-nano-8gb-pre-super" and before.device.peaks["peak_dram_bytes_per_s"].value == pytest.approx(68.256e9)
    super_mode = analyze_samples(load_trace(orin_nano_log(tmp_path, 3199, 1020)).data.samples, Source("s", "tegrastats", "", 0))
    assert super_mode.telemetry.board.key == "jetson-orin-nano-8gb" and super_mode.device.spec.key == "jetson-orin-nano-8gb"
    # Asked for by name, the module is the Super one; the variant by its own key.
    assert find_board("orin-nano-8gb").key == "jetson-orin-nano-8gb" and find_board("orin-nano-8gb-pre-super").key == "jetson-orin-nano-8gb-pre-super"
    # `orin-nano` is two modules of 51 and 102 GB/s: refused with both, never one of them guessed.
    with pytest.raises(UsageError, match="fits several Jetson boards: jetson-orin-nano-8gb, jetson-orin-nano-4gb"):
        find_board("orin-nano")


def test_an_orin_nano_4gb_has_its_own_board_and_a_64_bit_bus():
    # A real JetPack 6 line (PROVENANCE.md): 3,602 MB and six cores had "no unambiguous match" and no --device value
    # could name the board. Its memory never ran above 2133 MHz: the clocks before Super mode, 34 GB/s, not 51.
    analysis = analyze_samples(load_trace(FOUND / "tegrastats_orin_nano_4gb_jp6_one_line.log").data.samples, Source("n", "tegrastats", "", 0))
    assert analysis.telemetry.board.key == "jetson-orin-nano-4gb-pre-super"
    assert analysis.device.peaks["peak_dram_bytes_per_s"].value == pytest.approx(2133e6 * 2 * 8)
    assert analysis.device.spec.key == "jetson-orin-nano-4gb-pre-super" and analysis.device.spec.sm_count == 4
    assert "3602 MB RAM, 6 CPU cores" in analysis.telemetry.board_identified
    assert "--device jetson-orin-nano-4gb for that peak" in analysis.telemetry.board_identified
    assert find_board("orin-nano-4gb").peak_bytes_per_s == pytest.approx(51.2e9)


def test_an_orin_nx_8gb_is_told_from_an_orin_nano_by_its_cpu_clock(tmp_path):
    # Both have six cores, 8 GB and 102 GB/s; their GPUs' top clocks differ (765 MHz before Super mode on the NX, 1020
    # on the Super Nano), and with it what a held-down GPU clock is. Only the NX runs its cores above 1.8 GHz.
    nano_line = (FOUND / "tegrastats_orin_nano_jetson_clocks_nonroot.log").read_text().splitlines()[0]
    nx = tmp_path / "nx.log"
    nx.write_text(nano_line.replace("@1344", "@1984") + "\n")
    nx_board = telemetry_of(nx)
    assert nx_board.board.key == "jetson-orin-nx-8gb" and "a core at 1984 MHz" in nx_board.board_identified
    nano = telemetry_of(FOUND / "tegrastats_orin_nano_jetson_clocks_nonroot.log")
    assert nano.board.key == "jetson-orin-nano-8gb" and "--device jetson-orin-nx-8gb" in nano.board_identified


def busy_memory_copy(realdata_file, tmp_path):
    """The Orin log with the memory controller 70% busy (still at its logged clocks, 204-665 MHz) from line 5 on."""
    lines = realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log").read_text().splitlines()
    busy = [re.sub(r"EMC_FREQ \d+%", "EMC_FREQ 70%", line) if number >= 5 else line for number, line in enumerate(lines, start=1)]
    path = tmp_path / "busy.log"
    path.write_text("\n".join(busy) + "\n")
    return path


def test_orin_bandwidth_and_low_memory_clock(realdata_file, tmp_path):
    telemetry = run(realdata_file, "agx_orin64_jp6_ts_Hanner123_a.log")
    # First sample: 12% × 204 MHz × 2 × 32 B = 1.567 GB/s.
    assert telemetry.frame["emc_bytes_per_s"][0] == pytest.approx(0.12 * 204e6 * 2 * 32)
    assert telemetry.bandwidth_gb_s["max"] <= 204.8 * 0.05
    # At most 12% busy: DVFS keeps the clock low because nothing asks for more, which is not a finding.
    assert "emc_clock_low" not in kinds(telemetry)
    busy = analyze_samples(load_trace(busy_memory_copy(realdata_file, tmp_path)).data.samples, Source("busy", "tegrastats", "", 0)).telemetry
    low = next(f for f in busy.findings if f.kind == "emc_clock_low")
    assert "jetson_clocks" in low.message and low.evidence["board_max_emc_mhz"] == 3200
    assert low.evidence["busy_samples"] == 11 and low.evidence["max_emc_mhz"] <= 665


def test_findings_on_real_logs(realdata_file):
    assert "format_change" in kinds(run(realdata_file, "tx2_nosudo_vddin_plain_log_project.log"))
    nx = run(realdata_file, "xavier_nx_jp5_nosudo_ts_tegra_burn.log")
    assert "no_emc_clock" in kinds(nx) and nx.bandwidth_gb_s is None
    assert "gpu_idle_cpu_busy" in kinds(nx)
    # PMIC's fixed 100 °C reading on TX2 is not heat.
    assert "thermal" not in kinds(run(realdata_file, "tx2_l4t32_vddsys_dateheader_ssaraff98.txt"))


def test_energy_per_token(realdata_file):
    telemetry = run(realdata_file, "nano_pom5v_iram_csc2231.txt", tokens=1000)
    assert telemetry.energy_per_token_j == pytest.approx(telemetry.energy_j / 1000)
    assert telemetry.mean_power_w == pytest.approx(telemetry.frame["board_power_mw"].mean() / 1000)


ORIN_LINE = ("07-25-2026 09:08:{s:02d} RAM 20642/62817MB (lfb 1x2MB) CPU [23%@2201,10%@2201] EMC_FREQ {emc}%@3199 "
             "GR3D_FREQ {gpu}%@[1300,1300] cpu@{temp}C/52.968C gpu@47.625C/47.625C VDD_GPU_SOC 5139mW/5139mW/5139mW")


def test_memory_bound_and_thermal_findings_on_constructed_lines(tmp_path):
    lines = [ORIN_LINE.format(s=i, emc=85 if 2 <= i < 8 else 10, gpu=40, temp=91.5 if i == 9 else 50.0) for i in range(12)]
    path = tmp_path / "orin.log"
    path.write_text("\n".join(lines) + "\n")
    trace = load_trace(path)
    telemetry = analyze_samples(trace.data.samples, Source(str(path), "tegrastats", "", 0), board=find_board("agx-orin-64gb")).telemetry
    memory = [f for f in telemetry.findings if f.kind == "memory_bound"]
    assert len(memory) == 1
    assert (memory[0].start_s, memory[0].duration_s) == (2.0, 6.0)
    assert memory[0].evidence["mean_bandwidth_gb_s"] == pytest.approx(0.85 * 3199e6 * 64 / 1e9)
    thermal = next(f for f in telemetry.findings if f.kind == "thermal")
    assert thermal.evidence["max_temp_c"] == 91.5 and thermal.start_s == 9.0


def test_interval_option_without_timestamps(realdata_file):
    trace = load_trace(realdata_file("tegrastats/nano_pom5v_iram_csc2231.txt"), interval_s=0.1)
    assert trace.data.samples["time_s"][10] == pytest.approx(1.0)


def test_no_samples_is_a_clear_error(tmp_path):
    path = tmp_path / "prompt.log"
    path.write_text("nvidia@linux:~$ tegrastats\nRAM is great CPU [\n")
    with pytest.raises(TraceFormatError):
        load_trace(path)


def test_cli_json_telemetry(realdata_file):
    result = CliRunner().invoke(app, ["analyze", str(realdata_file("tegrastats/agx_orin64_jp6_ts_Hanner123_a.log")), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    telemetry = data["telemetry"]
    assert telemetry["samples"] == 15 and telemetry["board"] == "jetson-agx-orin-64gb"
    assert telemetry["bandwidth_gb_s"]["max"] == pytest.approx(0.12 * 204e6 * 64 / 1e9, rel=0.2)
    assert "energy" in {f["kind"] for f in telemetry["findings"]}
    assert data["kernels"] == []


def test_cli_table_and_device_option(realdata_file):
    path = str(realdata_file("tegrastats/mixed_tx2_tx1_xavier_oneline_each_ssaraff98.txt"))
    result = CliRunner().invoke(app, ["analyze", path, "--device", "tx2"])
    assert result.exit_code == 0
    assert "Jetson TX2" in result.stdout and "named with --device" in result.stdout
    bad = CliRunner().invoke(app, ["analyze", path, "--device", "orin-ultra"])
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: unknown Jetson board")


def test_oldest_grammar_tx1_l4t_28_1():
    """L4T 28.1 (TX1): lower-case `cpu [..]@MHz` with one shared clock, `EMC n%@MHz` and `GR3D n%@MHz` without _FREQ.
    Hand-written from the grammar in the issue before a real log of that release was found (the two real lines are
    checked below)."""
    from pathlib import Path

    from traceview.parsers.tegrastats import parse

    frame = parse(Path(__file__).parent / "fixtures" / "tegrastats_l4t28.1_tx1_oldest_grammar.log").samples
    assert frame["cpu_load_pct"].to_list() == [[12.0, 0.0, 0.0, 0.0], [52.0, 10.0, 3.0, 0.0]]
    assert frame["cpu_mhz"].to_list() == [[408.0] * 4, [1734.0] * 4]
    assert frame["emc_pct"].to_list() == [1.0, 12.0] and frame["emc_mhz"].to_list() == [1600.0, 1600.0]
    assert frame["gpu_pct"].to_list() == [39.0, 99.0] and frame["gpu_mhz"].to_list() == [76.0, 998.0]
    # Two real L4T 28.1 lines (tests/fixtures/found/PROVENANCE.md), indented as their Markdown code block had them.
    real = parse(FOUND / "tegrastats_tx1_l4t28.1_two_lines.log").samples
    assert real["cpu_load_pct"].to_list() == [[17.0, 13.0, 29.0, 5.0], [17.0, 11.0, 65.0, 0.0]]
    assert real["cpu_mhz"].to_list() == [[408.0] * 4, [1734.0] * 4] and real["emc_mhz"].to_list() == [408.0, 1600.0]
    assert real["gpu_pct"].to_list() == [3.0, 39.0] and real["gpu_mhz"].to_list() == [76.0, 76.0]
    assert telemetry_of(FOUND / "tegrastats_tx1_l4t28.1_two_lines.log").board.key == "jetson-tx1"


def test_telemetry_figure_shows_every_series_on_one_time_axis(realdata_file, tmp_path):
    """The dashboard's and the report's telemetry view: bandwidth and its peak, load, clocks, rails, temperatures, with
    stretch findings shaded where they happened."""
    from traceview.app.cli import run_analysis
    from traceview.app.figures import telemetry_figure

    analysis = run_analysis(busy_memory_copy(realdata_file, tmp_path), None)
    figure = telemetry_figure(analysis)
    names = {trace.name for trace in figure.data}
    assert {"EMC bandwidth", "Jetson AGX Orin 64GB peak", "GPU load", "GPU clock", "EMC clock", "VDD_GPU_SOC", "gpu temperature"} <= names
    axes = {trace.xaxis for trace in figure.data}
    assert axes == {"x", "x2", "x3", "x4", "x5"}  # five panels, zoomed together on one time axis:
    assert [figure.layout[f"xaxis{i}"].matches for i in ("", 2, 3, 4)] == ["x5"] * 4
    rail = next(t for t in figure.data if t.name == "VDD_GPU_SOC")
    assert rail.y[0] == pytest.approx(2.798)  # 2798 mW on the first line of the log, in W
    low_clock = next(f for f in analysis.telemetry.findings if f.kind == "emc_clock_low")
    shaded = [s for s in figure.layout.shapes if s.x0 == low_clock.start_s]
    assert shaded and shaded[0].x1 == low_clock.start_s + low_clock.duration_s


def test_batches_keep_line_numbers_order_and_counts(realdata_file, tmp_path, monkeypatch):
    # Lines are read in batches by polars and parsed on threads: with batches of 7 lines, a real log with CRLF ends,
    # blank and whitespace lines, a `date` header and stray text must read as it does in one batch.
    from traceview.parsers import tegrastats

    real = realdata_file("tegrastats/tx2_l4t32_vddsys_dateheader_ssaraff98.txt").read_bytes().splitlines()
    lines = [real[0]]
    for index, line in enumerate(real[1:60]):
        lines.append(line)
        if index % 9 == 0:
            lines += [b"", b"   "]
        if index % 13 == 0:
            lines.append(b"nvidia@tx2:~$ sudo tegrastats")
    path = tmp_path / "crlf.log"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    whole = tegrastats.parse(path)
    monkeypatch.setattr(tegrastats, "_BATCH_LINES", 7)
    batched = tegrastats.parse(path)
    samples, report = batched.samples, batched.report
    assert samples.equals(whole.samples) and report == whole.report
    sample_lines = [number for number, line in enumerate(lines, start=1) if b"RAM " in line]
    assert samples["line_number"].to_list() == sample_lines
    assert (report.blank_lines, report.stray_lines, report.total_lines) == (14, 6, len(lines))
    assert str(samples["timestamp"][0]) == "2021-01-26 18:22:31"


def test_thor_logs_name_the_board_and_say_what_they_cannot_measure():
    # Lines from Jetson AGX Thor (JetPack 7 / L4T r39) found through the search index (tests/fixtures/found/PROVENANCE.md).
    from pathlib import Path

    found = Path(__file__).parent / "fixtures" / "found"
    jp7 = analyze_samples(load_trace(found / "tegrastats_thor_jp7_one_line.log").data.samples, Source("jp7", "tegrastats", "", 0)).telemetry
    assert jp7.board.key == "jetson-agx-thor"
    assert jp7.frame["gpu_mhz_per_gpc"][0].to_list() == [0, 0, 0] and jp7.frame["gpu_pct"][0] is None
    assert "no_gpu_utilisation" in kinds(jp7)
    assert "emc_clock_low" not in kinds(jp7)  # 0% busy at 665 MHz: DVFS, not a cap
    r39 = analyze_samples(load_trace(found / "tegrastats_thor_r39_idle_line.log").data.samples, Source("r39", "tegrastats", "", 0)).telemetry
    assert r39.board.key == "jetson-agx-thor"
    assert r39.frame["emc_mhz"][0] == 4266 and r39.frame["emc_pct"][0] is None
    assert {"no_emc_utilisation", "no_gpu_utilisation"} <= set(kinds(r39))
    assert r39.mean_power_w == pytest.approx(28.906)  # VIN, the input rail
