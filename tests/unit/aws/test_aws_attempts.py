"""``aws.max_attempts`` counts attempts, the first included, as its documentation says.

botocore reads a client config's ``retries.max_attempts`` as the retries *after* the first call and
``total_max_attempts`` as all attempts (botocore ``args.py`` ``_compute_retry_max_attempts``);
a server that always answers 500 shows which one the clients got, over the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from kubespot.aws import AwsClients, AwsError
from kubespot.aws.bootstrap import make_clients
from kubespot.config.aws import AwsSettings


class _Broken(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # AWS query and JSON protocol calls are POSTs
        type(self).calls += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"__type": "InternalFailure", "message": "broken on purpose"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def broken() -> Iterator[str]:
    _Broken.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def settings(endpoint: str) -> AwsSettings:
    return AwsSettings(region="us-east-1", endpoint_url=endpoint, max_attempts=2)


async def test_the_operators_clients_make_max_attempts_calls(broken: str) -> None:
    session = boto3.session.Session(aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
    async with AwsClients(settings(broken), session=session) as clients:
        with pytest.raises(AwsError):
            entry = {"Source": "s", "DetailType": "d", "Detail": "{}"}
            await clients.call("events", "PutEvents", Entries=[entry])
    assert _Broken.calls == 2


def test_the_bootstrap_clients_make_max_attempts_calls(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    clients = make_clients(settings(broken))
    with pytest.raises(Exception, match=r"broken on purpose"):
        clients.sqs.get_queue_url(QueueName="q")
    assert _Broken.calls == 2
