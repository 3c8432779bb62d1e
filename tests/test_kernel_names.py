"""Display names that tell the kernels of one run apart and say what each is (issue 31: four cuBLAS GEMVs were all
shown as `kernel`)."""

from __future__ import annotations

import csv
import html
import io
import json

from typer.testing import CliRunner

from traceview.analyzer.kernel_kinds import display_names
from traceview.app.cli import app
from traceview.app.reporters.markdown_report import escape_markdown

GEMV = "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv"
# The two cuBLAS GEMV instantiations of the same run (RTX 5090, llm-perf-opt) as its nsys kernel summary names them;
# Nsight Compute prints them without namespaces and casts, as in the real details page.
NSYS_NAMES = [
    "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)0, "
    f"(bool)1, (bool)1, (bool)0, (int){n}, (bool)0, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, "
    "cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13)" for n in (7, 6)]


def _as_ncu_prints(name: str) -> str:
    return (name.replace("std::", "").replace("internal::gemvx::", "").replace("(bool)", "").replace("(int)", ""))


def test_a_generic_function_name_keeps_the_template_argument_that_names_it():
    names = [_as_ncu_prints(n) for n in NSYS_NAMES]
    assert display_names(names[:1], ["kernel"]) == ["kernel<…cublasGemvParamsEx…>"]
    two = display_names(names, ["kernel", "kernel"])
    assert two == ["kernel<…cublasGemvParamsEx…; 7>", "kernel<…cublasGemvParamsEx…; 6>"]
    assert display_names(["void cutlass::Kernel2<Gemm>(Params)"], ["Kernel2"]) == ["cutlass::Kernel2"]
    assert display_names(["void kernel_impl<MyFunctor>(int)"], ["kernel_impl"]) == ["kernel_impl<MyFunctor>"]
    # Only scalars and numbers: nothing names it, and nothing is made up.
    assert display_names(["void kernel<128, float>(float*)"], ["kernel"]) == ["kernel"]
    # A name that says what it is stays as it is.
    assert display_names(["void vectorAdd<float>(float*)"], ["vectorAdd"]) == ["vectorAdd"]


def test_two_gemv_instantiations_have_two_names_in_every_output(realdata_file, tmp_path):
    lines = realdata_file(GEMV).read_text().splitlines(keepends=True)
    rows = list(csv.reader(lines))
    header, body = rows[0], rows[1:]
    ours = _as_ncu_prints(NSYS_NAMES[0])
    assert body[0][header.index("Kernel Name")] == ours  # the real export names the (int)7 instantiation this way
    second = [[("1" if i == 0 else _as_ncu_prints(NSYS_NAMES[1]) if i == header.index("Kernel Name") else cell) for i, cell in enumerate(r)]
              for r in body]
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, *body, *second])
    path = tmp_path / "two_gemvs.csv"
    path.write_text(buffer.getvalue())

    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["analyze", str(path), "-f", "json"]).stdout)
    shown = sorted(k["short_name"] for k in data["kernels"])
    assert shown == ["kernel<…cublasGemvParamsEx…; 6>", "kernel<…cublasGemvParamsEx…; 7>"]
    escapes = {"table": str, "md": escape_markdown, "html": html.escape}
    for fmt, escape in escapes.items():
        text = runner.invoke(app, ["analyze", str(path), "-f", fmt]).stdout
        for name in shown:
            assert escape(name) in text, (fmt, name)
