"""Benchmark: the dashboard server's peak memory while it takes an upload, against the upload limit (issue 32: a
500 MB upload just under the 512 MB cap peaked at 2.95 GB; a chunked 600 MB upload was read to 683 MB before a 400).

`traceview serve` runs as its own process, as a user runs it. Each case posts one upload callback the way the page's
dcc.Upload sends it (the file base64-encoded in a JSON body) and reads the server's peak RSS (VmHWM, reset before each
case through /proc/PID/clear_refs) minus its RSS before the case. The uploaded file is text no reader claims, so the
analysis stops at its first 64 kB and what is measured is the upload's own handling; the analysis of a real file
costs what `traceview analyze` of it costs.
Cases: just under the cap with a Content-Length; the same chunked (no length); 1.2× the cap chunked (refused while it
streams); 1.2× the cap with a Content-Length (refused before a byte is read, the connection closed).
Bound (docs/reliability.md): the upload's own peak within 3× the cap. The page sends the file as base64 in JSON, so
while the body is parsed its text and the string parsed from it (4/3 of the file each) are held at once: 2.67× is the
floor of any reader that parses the JSON whole, and 2× would need an upload route of its own. Linux only (/proc).
Usage: python benchmarks/bench_upload.py [--cap-mb 512]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "ncu" / "v100_cfd_details_ncu2019.5.csv"


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def _body(dependency: dict, size: int) -> bytes:
    """The upload callback's JSON body for a file of `size` bytes, as the page sends it."""
    data = (b"not a profile of any kind\n" * (size // 26 + 1))[:size]
    contents = "data:application/octet-stream;base64," + base64.b64encode(data).decode("ascii")
    outputs = [{"id": part.split(".", 1)[0], "property": part.split(".", 1)[1]} for part in dependency["output"][2:-2].split("...")]
    return json.dumps({"output": dependency["output"], "outputs": outputs, "changedPropIds": ["upload.contents"],
                       "inputs": [{"id": "upload", "property": "contents", "value": contents}],
                       "state": [{"id": "upload", "property": "filename", "value": "big.txt"}, {"id": "run", "property": "value", "value": None}]}).encode()


def _post(port: int, body: bytes, chunked: bool) -> tuple[int, str, str]:
    """Post the body; return (status, the Connection header, the first line of the answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def pieces() -> Iterator[bytes]:
        view = memoryview(body)
        for at in range(0, len(view), 1 << 20):
            yield bytes(view[at: at + (1 << 20)])

    headers = {"Content-Type": "application/json"}
    try:
        if chunked:
            connection.request("POST", "/_dash-update-component", body=pieces(), headers=headers, encode_chunked=True)
        else:
            connection.request("POST", "/_dash-update-component", body=body, headers=headers)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
        return response.status, response.getheader("Connection") or "", text.strip().splitlines()[0][:120] if text.strip() else ""
    except (BrokenPipeError, ConnectionResetError) as error:  # the server closed the connection while the body was sent
        return 0, "closed", type(error).__name__
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap-mb", type=int, default=512, help="--max-upload-mb of the server")
    args = parser.parse_args()
    cap = args.cap_mb * 2**20
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "traceview", "serve", str(SAMPLE), "--port", str(port), "--max-upload-mb", str(args.cap_mb)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "BROWSER": "true"})
    try:
        for _ in range(300):
            try:
                dependencies = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-dependencies", timeout=5).read())
                break
            except OSError:
                time.sleep(0.2)
        else:
            sys.exit("the server did not start")
        upload = next(d for d in dependencies if any(i["id"] == "upload" for i in d["inputs"]))
        print(f"traceview serve --max-upload-mb {args.cap_mb}; the upload's own peak = the server's peak RSS minus its RSS before it")
        print("  case                                  answer  peak over before  × cap")
        for label, size, chunked in (("just under the cap, Content-Length", cap - 2**20, False), ("just under the cap, chunked", cap - 2**20, True),
                                     ("1.2× the cap, chunked", int(cap * 1.2), True), ("1.2× the cap, Content-Length", int(cap * 1.2), False)):
            body = _body(upload, size)
            Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS
            before = _kb(server.pid, "VmRSS")
            status, connection, first = _post(port, body, chunked)
            del body
            peak = _kb(server.pid, "VmHWM") - before
            print(f"  {label:36s}  {status:4d}  {peak / 1024:8.0f} MB  {peak * 1024 / cap:5.2f}  {connection or '-':6s} {first}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
