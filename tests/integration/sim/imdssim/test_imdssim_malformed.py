"""Malformed requests at the wire level get an HTTP error, and the server keeps serving."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from imdssim_http import IID

from kubespot.sim.imdssim import ImdsSim, SimInstance


@pytest.fixture
async def sim() -> AsyncIterator[ImdsSim]:
    async with ImdsSim([SimInstance(IID)]) as s:
        yield s


async def raw(sim: ImdsSim, payload: bytes) -> bytes:
    host, port = sim.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (b"GARBAGE\r\n\r\n", b" 400 "),
        (b"GET /latest/meta-data/instance-id HTTP/9.9\r\nHost: x\r\n\r\n", b" 400 "),
        (b"GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", b" 400 "),
        (
            b"GET /latest/meta-data/../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b" 404 ",
        ),
        (b"GET /latest/meta-data/\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b" 400 "),
        (
            b"GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: x\r\nX-aws-ec2-metadata-token: \xff\r\n"
            b"Connection: close\r\n\r\n",
            b" 401 ",
        ),
        (
            b"PUT /latest/api/token HTTP/1.1\r\nHost: x\r\nX-aws-ec2-metadata-token-ttl-seconds: \xff\xfe\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n",
            b" 400 ",
        ),
    ],
)
async def test_malformed_requests_get_an_error_not_a_crash(
    sim: ImdsSim, payload: bytes, status: bytes
) -> None:
    answer = await raw(sim, payload)
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.") and status in status_line, status_line
    ok = await raw(sim, b"GET /latest/meta-data/instance-id HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(IID.encode())
