"""How to produce each input traceview reads: one line per format family, by the start of the format's name
(shown by the MCP server's formats(); a registry test requires a line for every format)."""

from __future__ import annotations

HOW_TO_PRODUCE = {
    "ncu-csv": "ncu --set full -o run ./app; ncu -i run.ncu-rep --csv --page raw > run.csv (or --page details)",
    "ncu-rep": "ncu --set full -o run ./app (the .ncu-rep; pip install 'traceview[ncu-rep]' to read it)",
    "ncu-console": "ncu ./app > run.txt (the console output)",
    "nsys-sqlite": "nsys profile -t cuda,nvtx,osrt -o run ./app; nsys export --type sqlite run.nsys-rep",
    "nsys-stats": "nsys stats --format csv run.nsys-rep > stats.csv (or the console tables)",
    "nvprof": "nvprof --log-file run.log ./app (summary), --metrics … (metrics), or -o run.nvvp (SQLite)",
    "pytorch-trace": "torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True, with_stack=True) → prof.export_chrome_trace('t.json'); "
                     "vLLM: VLLM_TORCH_PROFILER_DIR=dir",
    "tegrastats": "sudo tegrastats --interval 100 --logfile run.log",
    "llama": "llama-bench -o md > bench.md, or the timing lines llama-cli / llama-server print",
    "traceview-fleet": "traceview fleet DIR --format json -o fleet.json",
    "nvidia-smi-csv": "nvidia-smi --query-gpu=timestamp,uuid,utilization.gpu,memory.used,power.draw,clocks.sm --format=csv -l 1 > gpu.csv",
    "engine-metrics-csv": "scrape the server's /metrics (vLLM: num_requests_running, gpu_cache_usage_perc, …) into CSV, one column per metric",
    "serving-bench": "vllm bench serve … --save-result (the result JSON), or its console output; SGLang: python -m sglang.bench_serving --output-file",
}
