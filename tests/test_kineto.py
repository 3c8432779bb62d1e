"""PyTorch profiler traces (Kineto): every real trace analyzes, and its numbers hold against what a plain-`json`
script computes from the same file — kernel count and time per GPU, busy share as the union of GPU work over the
span, collective time, step median — and the op roofline holds against FLOPs computed by hand from the shapes."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app, run_analysis
from traceview.parsers import detect_format

TRACES = [
    "EDGE_a100pcie_x8_no_gpu_activity_events_zoology.json",
    "hf_qwen1.5-0.5b-chat_h100_recordshapes_tracelens.json.gz",
    "moe_switchtransformer_a100pcie_fp32_withstack_bs4_switchtr.json",
    "resnet50_v100dgxs_2021_oldschema_nw0_kineto.pt.trace.json.gz",
    "sglang_qwen3-8b_decode_mi300x_hipgraph_tracelens.json.gz",
    "train_128rank_job_rank0_SAMPLED_hta.json.gz",
    "train_128rank_job_rank1_SAMPLED_hta.json.gz",
    "train_a100x8_rank3of8_nccl_recordshapes_hta_tracediff_control.json.gz",
    "vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz",
    "vllm_mi300x_decode_full_graph_capture_rank0_emptydevname_tracelens.pt.trace.json.gz",
    "vllm_mi300x_decode_full_graph_replay_execution_tracelens.json.gz",
]
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}


def _plain(path: Path) -> dict:
    """What a plain script reads from the trace with the json module: GPU events per device, in ns."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    per_device: dict[int, dict] = {}
    steps = []
    for event in trace["traceEvents"]:
        category = str(event.get("cat") or "").lower()
        if event.get("ph") != "X":
            continue
        if category in GPU_CATEGORIES:
            args = event.get("args") or {}
            device = per_device.setdefault(int(args.get("device", event.get("pid"))), {"kernels": 0, "kernel_ns": 0, "intervals": [], "nccl_ns": 0})
            start, end = round(event["ts"] * 1000), round(event["ts"] * 1000) + round(event["dur"] * 1000)
            device["intervals"].append((start, end))
            if category == "kernel":
                device["kernels"] += 1
                device["kernel_ns"] += end - start
                if "nccl" in event["name"].lower():
                    device["nccl_ns"] += end - start
        if str(event.get("name", "")).startswith("ProfilerStep#"):
            steps.append(round(event["dur"] * 1000))
    for device in per_device.values():
        intervals = sorted(device.pop("intervals"))
        busy, reach = 0, None
        for start, end in intervals:
            if reach is None or start > reach:
                busy += end - start
                reach = end
            elif end > reach:
                busy += end - reach
                reach = end
        span = intervals[-1][1] - intervals[0][0] if intervals else 0
        device["span_ns"], device["busy_pct"] = span, 100.0 * busy / span if span else None
    return {"devices": per_device, "steps": steps}


@pytest.mark.parametrize("name", TRACES)
def test_every_trace_reads_and_its_numbers_hold_against_the_file(realdata_file, name):
    path = realdata_file(f"kineto/{name}")
    assert detect_format(path) == "pytorch-trace"
    analysis = run_analysis(path, None)
    truth = _plain(path)
    assert analysis.kind == "torch-trace"
    assert int(analysis.kernels["launches"].sum() or 0) == sum(d["kernels"] for d in truth["devices"].values())
    assert float(analysis.kernels["duration_ns"].sum() or 0) == pytest.approx(sum(d["kernel_ns"] for d in truth["devices"].values()), abs=1)
    nccl = analysis.kernels.filter(analysis.kernels["kernel_name"].str.to_lowercase().str.contains("nccl"))
    assert float(nccl["duration_ns"].sum() or 0) == pytest.approx(sum(d["nccl_ns"] for d in truth["devices"].values()), abs=1)
    devices = {d["device_id"]: d for d in analysis.detail.devices}
    for device_id, expected in truth["devices"].items():
        assert devices[device_id]["span_ns"] == pytest.approx(expected["span_ns"], abs=2)
        assert devices[device_id]["busy_pct"] == pytest.approx(expected["busy_pct"], abs=0.05)
    if len(truth["steps"]) >= 3:
        assert analysis.detail.steps["median_ns"] == pytest.approx(statistics.median(truth["steps"]), rel=1e-6)


def test_a_trace_without_gpu_activity_says_so_in_one_line(realdata_file):
    result = CliRunner().invoke(app, ["analyze", str(realdata_file("kineto/EDGE_a100pcie_x8_no_gpu_activity_events_zoology.json"))])
    assert result.exit_code == 0
    second = result.stdout.splitlines()[1]
    assert second.startswith("The trace holds no GPU activity") and "260 kernel launch calls" in second


def test_a_graph_capture_trace_is_said_to_be_one_not_an_idle_gpu(realdata_file):
    analysis = run_analysis(realdata_file("kineto/vllm_mi300x_decode_full_graph_capture_rank0_emptydevname_tracelens.pt.trace.json.gz"), None)
    assert analysis.detail.verdict["verdict"] == "graph_capture"
    assert analysis.detail.graphs["kernels"] == 7 and analysis.detail.graphs["captured_launch_calls"] >= 400
    assert "host-bound" not in analysis.detail.verdict["message"]


def test_graph_replayed_kernels_are_counted(realdata_file):
    analysis = run_analysis(realdata_file("kineto/vllm_mi300x_decode_full_graph_replay_execution_tracelens.json.gz"), None)
    assert analysis.detail.graphs["replayed_kernels"] == 421 and analysis.detail.graphs["graph_launches"] == 1
    assert analysis.detail.rocm


def test_the_op_roofline_holds_against_flops_from_the_shapes(realdata_file):
    analysis = run_analysis(realdata_file("kineto/hf_qwen1.5-0.5b-chat_h100_recordshapes_tracelens.json.gz"), None)
    # Keyed by the tensors' shapes (the scalars after them, alpha and beta, have empty dims).
    ops = {(op["op"], json.dumps([d for d in op["input_dims"] if d])): op for op in analysis.detail.ops}
    # aten::mm of [8944, 1024] × [1024, 2816] (the MLP's up projection over 16 × 559 tokens): 2·M·K·N FLOPs.
    mm = ops[("aten::mm", json.dumps([[8944, 1024], [1024, 2816]]))]
    assert mm["flop_per_call"] == 2 * 8944 * 1024 * 2816
    assert mm["bytes_per_call"] == (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2  # bf16
    assert mm["achieved_flop_per_s"] == pytest.approx(mm["flop_per_call"] * mm["calls"] / (mm["kernel_ns"] / 1e9))
    assert mm["bound"] == "compute" and mm["source"] == "estimated from shapes"
    # aten::addmm with its bias first: [1024] + [8944, 1024] × [1024, 1024].
    addmm = ops[("aten::addmm", json.dumps([[1024], [8944, 1024], [1024, 1024]]))]
    assert addmm["flop_per_call"] == 2 * 8944 * 1024 * 1024
    # Flash attention's own op takes q as [batch, length, heads, head dim]: 4·B·H·L·S·D.
    flash = next(op for op in analysis.detail.ops if op["op"] == "aten::_flash_attention_forward")
    assert flash["flop_per_call"] == 4 * 16 * 16 * 559 * 559 * 64


def test_estimated_verdicts_are_marked_as_such_in_every_output(realdata_file, tmp_path):
    path = realdata_file("kineto/hf_qwen1.5-0.5b-chat_h100_recordshapes_tracelens.json.gz")
    text = CliRunner().invoke(app, ["analyze", str(path)]).stdout
    assert "Ops on the roofline (estimated from shapes)" in text
    data = json.loads(CliRunner().invoke(app, ["analyze", str(path), "--format", "json"]).stdout)
    assert data["torch"]["op_verdicts"] == "estimated from shapes" and all(op["source"] == "estimated from shapes" for op in data["torch"]["ops"])


def test_the_vllm_trace_says_first_where_the_time_went_and_what_held_each_step(realdata_file):
    path = realdata_file("kineto/vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz")
    lines = CliRunner().invoke(app, ["analyze", str(path)]).stdout.splitlines()
    assert lines[1].startswith("Verdict: compute-bound: kernels take 79.8% of GPU 0's span (communication alone 9.2%")
    steps = next(line for line in lines[:12] if line.startswith("Steps (gpu_worker.execute_model)"))
    # The 11 outer execute_model calls of the trace (vllm/v1/worker/gpu_worker.py), median of their durations.
    opener = gzip.open(path, "rt", encoding="utf-8")
    with opener as handle:
        events = json.load(handle)["traceEvents"]
    durations = [round(e["dur"] * 1000) for e in events if e.get("cat") == "python_function" and e["name"].endswith("gpu_worker.py(263): execute_model")]
    assert len(durations) == 11 and "11 steps" in steps
    assert f"median {statistics.median(durations) / 1e6:.2f} ms" in steps
    assert any(line.startswith("CUDA graphs: 8,667 of 13,508 kernels replayed from 729 graph launches") for line in lines[:12])
    analysis = run_analysis(path, None)
    collectives = {c["collective"]: c for c in analysis.detail.collectives}
    assert collectives["all-reduce"]["count"] == 161 + 1449  # NCCL ring all-reduce and vLLM's custom cross-device reduce
    assert collectives["all-gather"]["count"] == 10 and collectives["all-gather"]["bus_bytes_per_s"] > 0


def test_a_cut_trace_is_read_up_to_the_cut_and_says_so(realdata_file, tmp_path):
    raw = gzip.decompress(realdata_file("kineto/sglang_qwen3-8b_decode_mi300x_hipgraph_tracelens.json.gz").read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) // 2])
    result = CliRunner().invoke(app, ["analyze", str(cut), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    notes = json.loads(result.stdout)["notes"]
    assert any("it looks cut short" in note for note in notes)


def test_a_damaged_trace_gets_one_line(tmp_path):
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text('{"traceEvents": [}')
    result = CliRunner().invoke(app, ["analyze", str(bad)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "PyTorch profiler trace" in result.stderr


def test_huge_process_ids_and_times_are_read_without_overflow(tmp_path):
    # A damaged trace: a process id near 2**61 (packed with the thread id into 64 bits) and a start plus duration
    # that would pass 2**63 ns if both were allowed up to 9e15 µs.
    events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 2**61, "tid": 2**61, "ts": 1.0, "dur": 1.0, "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3e15, "dur": 3.9e15, "args": {"device": 0, "correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 8e15, "dur": 8e15, "args": {"device": 0, "correlation": 2}}]
    path = tmp_path / "damaged.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = CliRunner().invoke(app, ["analyze", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["launches"] == 1 and any("left out" in note for note in data["notes"])


def test_the_dashboard_and_report_chart_is_the_op_roofline_marked_estimated(realdata_file):
    # A PyTorch trace's kernels carry no counters: their own chart was empty. Its ops, placed by the FLOPs and bytes
    # their shapes give, are the roofline instead, and the chart says they are estimated.
    from traceview.app.views import view_for

    analysis = run_analysis(realdata_file("kineto/hf_qwen1.5-0.5b-chat_h100_recordshapes_tracelens.json.gz"), None)
    chart = view_for(analysis).figure(analysis)
    assert "estimated from the ops' shapes" in chart.layout.title.text
    dots = [trace for trace in chart.data if (trace.name or "").endswith("-bound ops (estimated)")]
    placed = [op for op in analysis.detail.ops if op["arithmetic_intensity"] is not None]
    assert sum(len(trace.x) for trace in dots) == len(placed) > 0
    mm = next(op for op in placed if op["op"] == "aten::mm")
    xs = [x for trace in dots for x in trace.x]
    ys = [y for trace in dots for y in trace.y]
    assert (mm["arithmetic_intensity"], mm["achieved_flop_per_s"]) in list(zip(xs, ys, strict=True))
    # A trace recorded without shapes has no ops to place: the kernels' chart, as before.
    plain = run_analysis(realdata_file("kineto/vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz"), None)
    assert not plain.detail.ops and "Op roofline" not in (view_for(plain).figure(plain).layout.title.text or "")


def _annotations(tmp_path: Path, ranges: list[tuple[str, str, float, float]]) -> Path:
    """A trace of CPU ranges only: (category, name, start us, duration us) on one thread."""
    events = [{"ph": "X", "cat": category, "name": name, "pid": 1, "tid": 1, "ts": start, "dur": duration}
              for category, name, start, duration in ranges]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_profiler_steps_are_the_steps_though_a_stack_trace_nests_them_inside_prof_step(tmp_path):
    """A with_stack trace (TraceLens' MI300 ResNet) records the Python frame of each prof.step() call, and each
    ProfilerStep opens inside the frame that closed the last: `profiler.step` nested above ProfilerStep#N and was taken
    for the steps (median 171 us instead of 15.95 ms). Optimizer steps are not iterations either."""
    ranges = []
    for step in range(3):
        ranges += [("python_function", "torch/profiler/profiler.py(821): step", step * 1000.0, 300.0),
                   ("user_annotation", f"ProfilerStep#{step + 1}", step * 1000.0 + 5, 1000.0 - step),
                   ("python_function", "torch/optim/sgd.py(80): step", step * 1000.0 + 800, 50.0),
                   ("user_annotation", "Optimizer.step#SGD.step", step * 1000.0 + 800, 50.0)]
    ranges.append(("python_function", "torch/profiler/profiler.py(821): step", 3000.0, 300.0))
    steps = run_analysis(_annotations(tmp_path, ranges), None).detail.steps
    assert steps["name"] == "ProfilerStep#N" and steps["median_ns"] == 999_000


def test_a_programs_own_step_function_still_marks_its_steps(tmp_path):
    """`train.py(50): step`, a with_stack frame of the program's own loop, is a step; torch's own are not."""
    ranges = [("python_function", "train.py(50): step", 1000.0 * i, 900.0 + i) for i in range(4)]
    ranges += [("python_function", "/usr/lib/python3/dist-packages/torch/optim/lr_scheduler.py(200): step", 1000.0 * i + 950, 10.0) for i in range(4)]
    steps = run_analysis(_annotations(tmp_path, ranges), None).detail.steps
    assert steps["name"] == "train.step" and steps["median_ns"] == 901_500


def test_optimizer_step_ranges_are_not_iterations(tmp_path):
    """An MTIA training trace with one ProfilerStep and five nested optimizer ranges had steps of median 146 us and
    p99 4.4 s: optimizer.step() is one part of an iteration."""
    ranges = [("user_annotation", "ProfilerStep#1", 0.0, 10_000.0)]
    ranges += [("user_annotation", "Optimizer.step#CombinedOptimizer.step", 100.0 + 1000 * i, 100.0 * (i + 1)) for i in range(5)]
    ranges += [("python_function", "lr_scheduler.step", 700.0 + 1000 * i, 10.0) for i in range(5)]
    assert run_analysis(_annotations(tmp_path, ranges), None).detail.steps is None


def test_another_accelerators_trace_is_not_called_cpu_only(tmp_path):
    """Meta's MTIA traces (HTA's test data) hold their device work as `mtia_ccp_events` and `mtia_runtime`, which
    traceview does not read: it says so, rather than that the profile is CPU-only."""
    ranges = [("cpu_op", "aten::mm", 0.0, 50.0)] + [("mtia_ccp_events", "kernel_x", 10.0 * i, 5.0) for i in range(3)]
    ranges += [("mtia_runtime", "mtiaLaunch", 1.0, 2.0), ("Trace", "PyTorch Profiler (0)", 0.0, 100.0)]
    headline = run_analysis(_annotations(tmp_path, ranges), None).detail.headline
    assert "mtia_ccp_events ×3, mtia_runtime ×1" in headline and "CPU-only" not in headline and "Trace" not in headline
    only_cpu = run_analysis(_annotations(tmp_path, ranges[:1] + ranges[-1:]), None).detail.headline
    assert only_cpu.endswith("a CPU-only profile")
