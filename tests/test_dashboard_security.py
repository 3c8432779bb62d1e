"""The dashboard as a server others can reach: size limits enforced by the server, Host names checked (DNS rebinding),
security headers, malformed requests answered with 400, and uploads that belong to the browser session that made them.
Through Flask's test client: no browser needed."""

from __future__ import annotations

import json

import pytest

from traceview.app.cli import allowed_hosts, run_analysis
from traceview.app.dashboard import SESSION_COOKIE, RunStore, create_app

CFD = "ncu_details/ncu2019.5_v100_aws_cfd_thousands_sep_xplacer.log"
GEMV = "ncu_details/ncu2025.1_cc120_gemv_details_llmperfopt.csv"


@pytest.fixture
def served(realdata_file):
    store = RunStore(uploads_per_session=2)
    store.add(run_analysis(realdata_file(CFD), None), "cfd.log")
    app = create_app(store, lambda path: run_analysis(path, None), max_upload_bytes=2**20, allowed_hosts=allowed_hosts("127.0.0.1", []))
    return store, app.server.test_client(), run_analysis(realdata_file(GEMV), None)


def test_headers_and_cookie(served):
    _, client, _ = served
    response = client.get("/", headers={"Host": "127.0.0.1:8050"})
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert SESSION_COOKIE in response.headers.get("Set-Cookie", "") and "HttpOnly" in response.headers["Set-Cookie"]


def test_other_host_names_are_refused(served):
    _, client, _ = served
    assert client.get("/", headers={"Host": "attacker.example:8050"}).status_code == 403
    assert client.get("/", headers={"Host": "localhost:8050"}).status_code == 200
    assert client.get("/", headers={"Host": "[::1]:8050"}).status_code == 200
    assert allowed_hosts("0.0.0.0", []) is None and allowed_hosts("10.0.0.5", ["gpu-box"]) == {"10.0.0.5", "gpu-box"}


def test_oversized_requests_are_refused_before_they_are_read(served):
    _, client, _ = served
    response = client.post("/_dash-update-component", headers={"Host": "127.0.0.1"}, data=b"x" * (3 * 2**20), content_type="application/json")
    assert response.status_code == 413 and b"--max-upload-mb" in response.data


def test_malformed_callback_requests_get_400(served):
    _, client, _ = served
    for body in (b"not json", b"[]", json.dumps({"output": 3}).encode()):
        response = client.post("/_dash-update-component", headers={"Host": "127.0.0.1"}, data=body, content_type="application/json")
        assert response.status_code == 400, body


def test_uploads_belong_to_their_session_and_never_evict_the_shared_runs(served):
    store, client, gemv = served
    for n in range(5):  # more uploads than a session may keep
        store.add(gemv, f"upload{n}.csv", session="a" * 24)
    store.add(gemv, "other.csv", session="b" * 24)
    assert store.labels("a" * 24) == ["cfd.log", "upload3.csv", "upload4.csv"]
    assert store.labels("b" * 24) == ["cfd.log", "other.csv"] and store.labels(None) == ["cfd.log"]

    def layout_labels(session):
        client.set_cookie(SESSION_COOKIE, session, domain="127.0.0.1")
        layout = client.get("/_dash-layout", headers={"Host": "127.0.0.1"}).get_data(as_text=True)
        return {label for label in ("cfd.log", "upload4.csv", "other.csv") if f'"{label}"' in layout}

    assert layout_labels("a" * 24) == {"cfd.log", "upload4.csv"}  # survives a reload: the page is built per session
    assert layout_labels("b" * 24) == {"cfd.log", "other.csv"}


def test_a_session_idle_for_a_day_loses_its_uploads():
    from traceview.app.dashboard import SESSION_IDLE_S, RunStore

    now = [0.0]
    store = RunStore(clock=lambda: now[0])
    store.add("shared", "shared.csv")  # type: ignore[arg-type]
    store.add("mine", "upload.csv", session="a")  # type: ignore[arg-type]
    store.add("theirs", "other.csv", session="b")  # type: ignore[arg-type]
    now[0] = SESSION_IDLE_S - 1
    assert store.labels("a") == ["shared.csv", "upload.csv"]  # a reload within the day: still there, and touched
    now[0] = SESSION_IDLE_S + 10  # b has been idle for more than a day, a for ten seconds
    assert store.labels("b") == ["shared.csv"] and store.labels("a") == ["shared.csv", "upload.csv"]
    now[0] = 3 * SESSION_IDLE_S
    assert store.labels("a") == ["shared.csv"]  # the shared runs are never evicted


def _callback(inputs, state=(), output="..message.children..", outputs=True):
    body = {"output": output, "inputs": list(inputs), "state": list(state), "changedPropIds": []}
    if outputs:
        body["outputs"] = {"id": "message", "property": "children"}
    return json.dumps(body).encode()


def test_callback_values_of_the_wrong_type_get_400_not_an_internal_error(served):
    # Issue 32: `contents` an int, `filename` a list or no `outputs` reached the callbacks and ended in HTTP 500.
    _, client, _ = served
    bodies = [
        _callback([{"id": "upload", "property": "contents", "value": 7}], [{"id": "upload", "property": "filename", "value": "a.csv"}]),
        _callback([{"id": "upload", "property": "contents", "value": "data:,"}], [{"id": "upload", "property": "filename", "value": ["a"]}]),
        _callback([{"id": "run", "property": "value", "value": "cfd.log"}], outputs=False),
        _callback([{"id": "nowhere", "property": "value", "value": "x"}]),
        _callback(["not an object"]),
    ]
    for body in bodies:
        response = client.post("/_dash-update-component", headers={"Host": "127.0.0.1"}, data=body, content_type="application/json")
        assert response.status_code == 400, body


def test_a_chunked_upload_over_the_limit_is_cut_off_at_the_limit_and_the_connection_closed(realdata_file):
    import io

    store = RunStore()
    app = create_app(store, lambda path: run_analysis(path, None), max_upload_bytes=2**20, allowed_hosts=allowed_hosts("127.0.0.1", [])).server

    class Endless(io.RawIOBase):
        """A body with no length that would never end: only the limit stops reading it."""

        read_bytes = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            buffer[:] = b"x" * len(buffer)
            Endless.read_bytes += len(buffer)
            return len(buffer)

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    environ = EnvironBuilder(path="/_dash-update-component", method="POST", headers={"Host": "127.0.0.1", "Transfer-Encoding": "chunked"},
                             content_type="application/json").get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ.update({"wsgi.input": io.BufferedReader(Endless()), "wsgi.input_terminated": True})
    _, status, headers = run_wsgi_app(app.wsgi_app, environ)
    assert status.startswith("413")
    assert headers.get("Connection") == "close"
    assert Endless.read_bytes < 3 * 2**20  # the limit (1 MB of upload, 1.4 MB of request) and one buffer more


def _upload_callback(app, data: bytes, filename: str) -> bytes:
    """The upload callback's body as the page sends it (outputs from the app's own callback map)."""
    import base64

    output = next(key for key, spec in app.callback_map.items() if any(i["id"] == "upload" for i in spec["inputs"]))
    outputs = [{"id": part.split(".", 1)[0], "property": part.split(".", 1)[1]} for part in output[2:-2].split("...")]
    return json.dumps({"output": output, "outputs": outputs, "changedPropIds": ["upload.contents"],
                       "inputs": [{"id": "upload", "property": "contents", "value": "data:text/csv;base64," + base64.b64encode(data).decode()}],
                       "state": [{"id": "upload", "property": "filename", "value": filename}, {"id": "run", "property": "value", "value": None}]}).encode()


@pytest.mark.parametrize("chunked", [False, True])
def test_an_upload_is_read_once_and_analysed_with_or_without_a_length(realdata_file, chunked):
    # The guard reads the body itself, in pieces, and hands Dash the parsed JSON (bench_upload.py measures the memory).
    import io

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    store = RunStore()
    app = create_app(store, lambda path: run_analysis(path, None), max_upload_bytes=2**20, allowed_hosts=allowed_hosts("127.0.0.1", []))
    body = _upload_callback(app, realdata_file(GEMV).read_bytes(), "gemv.csv")
    headers = {"Host": "127.0.0.1", **({"Transfer-Encoding": "chunked"} if chunked else {})}
    environ = EnvironBuilder(path="/_dash-update-component", method="POST", headers=headers, content_type="application/json",
                             data=body).get_environ()
    if chunked:
        environ.pop("CONTENT_LENGTH", None)
        environ.update({"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True})
    answer, status, _ = run_wsgi_app(app.server.wsgi_app, environ)
    assert status.startswith("200"), b"".join(answer)[:300]
    assert "Loaded gemv.csv" in b"".join(answer).decode() and store.labels(None)[-1] == "gemv.csv"
