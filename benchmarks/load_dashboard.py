"""Load test: N concurrent clients for D seconds against `traceview serve` on loopback, each loading the page and
driving the callbacks a user drives (choose a run, select a kernel, click a dot, open the timeline); prints requests,
failures and callback latency percentiles.

The server is the dashboard over the bundled samples, in this process on a threaded WSGI server, as `serve` runs it.
Callback requests are built from the app's own `/_dash-dependencies`, as Dash's page builds them.
Targets (issue 14): no request fails; callback p99 under 1 s with 50 clients for 60 s.
Usage: python benchmarks/load_dashboard.py [--clients 50] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceview.app.cli import bundled_samples, run_analysis  # noqa: E402
from traceview.app.dashboard import RunStore, create_app, table_rows  # noqa: E402


def _outputs(spec: str) -> list[dict[str, str]]:
    """Dash's output spec (`..a.b...c.d@hash..` for several) as the list of {id, property} the page sends."""
    parts = spec[2:-2].split("...") if spec.startswith("..") else [spec]
    return [{"id": part.split(".", 1)[0], "property": part.split(".", 1)[1]} for part in parts]


def _request(base: str, dependency: dict, values: dict[str, object], changed: str, cookie: str | None) -> tuple[float, int]:
    body = {
        "output": dependency["output"], "outputs": _outputs(dependency["output"]),
        "inputs": [{"id": i["id"], "property": i["property"], "value": values.get(f"{i['id']}.{i['property']}")} for i in dependency["inputs"]],
        "state": [{"id": s["id"], "property": s["property"], "value": values.get(f"{s['id']}.{s['property']}")} for s in dependency["state"]],
        "changedPropIds": [changed],
    }
    if len(body["outputs"]) == 1 and not dependency["output"].startswith(".."):
        body["outputs"] = body["outputs"][0]
    request = urllib.request.Request(base + "_dash-update-component", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **({"Cookie": cookie} if cookie else {})})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = 0
    return time.perf_counter() - start, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    from werkzeug.serving import make_server

    store = RunStore()
    runs = []
    for path in bundled_samples():
        analysis = run_analysis(path, None, timeline=True)  # as `traceview serve` analyses
        store.add(analysis, path.name)
        runs.append((path.name, [row["id"] for row in table_rows(analysis)]))
    app = create_app(store, lambda path: run_analysis(path, None, timeline=True))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = make_server("127.0.0.1", port, app.server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{port}/"
    dependencies = json.loads(urllib.request.urlopen(base + "_dash-dependencies").read())

    def find(*inputs: str) -> dict:
        return next(d for d in dependencies if {f"{i['id']}.{i['property']}" for i in d["inputs"]} == set(inputs))

    show_run, select = find("run.value", "per-launch.value"), find("kernels.selectedRows")
    timeline = find("run.value", "timeline.relayoutData", "tabs.value")
    latencies: list[float] = []
    failures = [0]
    pages = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def client(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(base, timeout=30) as page:
                    page.read()
                    cookie = (page.headers.get("Set-Cookie") or "").split(";", 1)[0] or None
                ok_page = True
            except OSError:
                ok_page, cookie = False, None
            label, kernels = rng.choice(runs)
            values: dict[str, object] = {"run.value": label, "per-launch.value": [], "tabs.value": "timeline-tab", "timeline.relayoutData": None}
            timings = [_request(base, show_run, values, "run.value", cookie)]
            if kernels:
                values["kernels.selectedRows"] = [{"id": rng.choice(kernels)}]
                timings.append(_request(base, select, values, "kernels.selectedRows", cookie))
            timings.append(_request(base, timeline, values, "tabs.value", cookie))
            with lock:
                pages[0] += 1
                failures[0] += (not ok_page) + sum(status != 200 for _, status in timings)
                latencies.extend(seconds for seconds, _ in timings)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    server.shutdown()
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")  # noqa: E731
    print(f"{args.clients} clients for {args.seconds:.0f} s: {pages[0]} page loads, {len(latencies)} callback requests, {failures[0]} failed")
    print(f"callback latency: p50 {p(0.5) * 1e3:.0f} ms, p90 {p(0.9) * 1e3:.0f} ms, p99 {p(0.99) * 1e3:.0f} ms, "
          f"mean {statistics.fmean(latencies) * 1e3 if latencies else float('nan'):.0f} ms (target: p99 < 1 s, no failure)")


if __name__ == "__main__":
    main()
