"""`traceview mcp`: the server started as a subprocess and spoken to with the MCP SDK's own stdio client — the tools
listed, each called on real files, the answers checked against the CLI's JSON for the same file, and a path outside
the root, a symlink out of it and a damaged file each a tool error while the server keeps answering."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from traceview.app.cli import app

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'traceview[mcp]')")
from mcp import Client, StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
TOOLS = {"analyze", "kernel", "window", "diff", "fleet", "formats"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root folder holding copies of the bundled samples, a damaged file, and a symlink out of the root."""
    root = tmp_path_factory.mktemp("mcp_root")
    shutil.copytree(SAMPLES, root / "samples")
    for rank in (0, 1):
        shutil.copy(SAMPLES / "nsys" / "h100x2_copy_bound_nsys2026.2.sqlite", root / f"job_rank{rank}.sqlite")
    (root / "damaged.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    outside = tmp_path_factory.mktemp("outside") / "secret.csv"
    shutil.copy(SAMPLES / "ncu" / "v100_cfd_details_ncu2019.5.csv", outside)
    (root / "link.csv").symlink_to(outside)
    return root


def _session(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    """Start the server over stdio, list its tools, make the calls in order; return (tool names, results)."""

    async def talk() -> tuple[list[str], list[Any]]:
        parameters = StdioServerParameters(command=sys.executable, args=["-m", "traceview", "mcp", "--root", str(root)])
        async with Client(parameters, read_timeout_seconds=120) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return tools, results

    return asyncio.run(talk())


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content.get("result", result.structured_content))
    return json.loads(result.content[0].text)


def _cli_json(path: Path) -> dict[str, Any]:
    return json.loads(CliRunner().invoke(app, ["analyze", str(path), "--format", "json"]).stdout)


def test_the_tools_answer_as_the_cli_does_and_bad_input_is_a_tool_error(served):
    nsys = "samples/nsys/h100x2_copy_bound_nsys2026.2.sqlite"
    ncu = "samples/ncu/v100_cfd_details_ncu2019.5.csv"
    calls = [
        ("analyze", {"path": nsys, "top": 5}),
        ("kernel", {"path": ncu, "name": "cuda_compute_flux"}),
        ("window", {"path": nsys, "start_ms": 0, "end_ms": 200}),
        ("diff", {"before": ncu, "after": "samples/ncu/gtx1650_calc_energy_raw.csv", "fail_on_regression": 5}),
        ("fleet", {"paths": ["job_rank0.sqlite", "job_rank1.sqlite"]}),
        ("formats", {}),
        ("analyze", {"path": "/etc/passwd"}),
        ("analyze", {"path": "link.csv"}),
        ("analyze", {"path": "damaged.sqlite"}),
        ("analyze", {"path": nsys}),  # still answering, from its cache
    ]
    tools, results = _session(served, calls)
    assert set(tools) == TOOLS

    overview = _data(results[0])
    cli = _cli_json(served / nsys)
    assert overview["summary"] == cli["summary"] and overview["verdict"] == cli["timeline"]["verdict"]["message"]
    assert [k["short_name"] for k in overview["kernels"]] == [k["short_name"] for k in cli["kernels"][:5]]
    assert overview["more_kernels"] == len(cli["kernels"]) - 5 and "top=" in overview["ask_for_more"]

    flux = _data(results[1])["kernel"]
    expected = next(k for k in _cli_json(served / ncu)["kernels"] if k["short_name"] == "cuda_compute_flux")
    assert flux["bound"] == expected["bound"] == "latency" and flux["occupancy"] == expected["occupancy"]

    window = _data(results[2])
    assert {gpu["device_id"] for gpu in window["gpus"]} == {0, 1} and window["gpus"][0]["top_kernels"]
    assert window["host_threads"] and window["origin"].startswith("ms from the first GPU activity")

    compared = _data(results[3])
    assert compared["kind"] == "kernels" and isinstance(compared["gate_fails"], bool)

    fleet = _data(results[4])
    assert len(fleet["ranks"]) == 2 and fleet["failures"] == []

    formats = _data(results[5])
    names = {f["format"] for f in formats["formats"]}
    assert {"nsys-sqlite", "pytorch-trace", "ncu-csv-raw"} <= names
    assert all(f["how_to_produce"] for f in formats["formats"])

    for result, words in ((results[6], "outside the folders"), (results[7], "outside the folders"),
                          (results[8], "damaged.sqlite")):
        assert result.is_error
        text = result.content[0].text
        assert words in text and "\n" not in text.strip() and "Traceback" not in text
    assert _data(results[9])["summary"] == cli["summary"]


def test_the_mcp_command_refuses_a_root_that_is_no_folder(tmp_path):
    result = CliRunner().invoke(app, ["mcp", "--root", str(tmp_path / "absent")])
    assert result.exit_code == 1 and "is not a folder" in result.stderr


def test_the_tools_on_a_real_pytorch_trace_match_the_cli(realdata_file):
    trace = realdata_file("kineto/vllm_h100x4_tp4_rank0_cudagraphs_nccl_tracemap.pt.trace.json.gz")
    _, results = _session(trace.parent, [("analyze", {"path": trace.name}), ("window", {"path": trace.name, "start_ms": 0, "end_ms": 20}),
                                         ("kernel", {"path": trace.name, "name": "ncclDevKernel_AllReduce"})])
    overview, cli = _data(results[0]), _cli_json(trace)
    assert overview["kind"] == "torch-trace" and overview["summary"] == cli["summary"]
    assert overview["verdict"] == cli["timeline"]["verdict"]["message"] and overview["steps"]["count"] == cli["timeline"]["steps"]["count"]
    assert overview["collectives"] == cli["torch"]["collectives"]
    window = _data(results[1])
    assert window["gpus"][0]["device_id"] == 0 and window["gpus"][0]["kernel_ns"] > 0
    assert _data(results[2])["kernel"]["launches"] == 161
