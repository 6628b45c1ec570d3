"""A body over ERRTRIAGE_MAX_BODY_BYTES is answered 413 after the rest of it was read and dropped
(bounded in bytes and time), so a client that writes everything before reading gets the answer."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from service.api.body import DRAIN_SECONDS
from tests.servers import Process

ELEVEN_MIB = 11 * 1024 * 1024


def post(url: str, body: bytes | Iterator[bytes], headers: dict[str, str]) -> urllib.error.HTTPError:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # type: ignore[arg-type]
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=30)
    return raised.value


@pytest.fixture
def server(spawn: Callable[..., Process]) -> Process:
    return spawn(ERRTRIAGE_NOTIFY_ENABLED="false")  # the default limit: 1 MiB


@pytest.mark.parametrize("path", ["/v1/errors", "/v1/classify", "/v1/notifications/test"])
def test_urllib_posting_11_mib_reads_the_413(server: Process, path: str) -> None:
    body = b'{"message": "' + b"x" * ELEVEN_MIB + b'"}'
    answer = post(server.url + path, body, {"Content-Type": "application/json"})
    assert answer.code == 413
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.headers["Connection"] == "close"
    assert json.loads(answer.read())["status"] == 413


def test_urllib_chunked_body_over_the_limit_reads_the_413(server: Process) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(11):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    answer = post(server.url + "/v1/errors", chunks(), {"Content-Type": "application/json",
                                                         "Transfer-Encoding": "chunked"})
    assert answer.code == 413
    assert "over the limit" in json.loads(answer.read())["detail"]


def test_the_drain_is_bounded_in_time(server: Process) -> None:
    """A client that declares 11 MiB, sends a little and stalls gets its 413 once the drain gives up."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"POST /v1/errors HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {ELEVEN_MIB}\r\n\r\n".encode() + b"x" * 4096)
        started = time.monotonic()
        reply = sock.recv(65536)
        waited = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 413")
    assert DRAIN_SECONDS - 1 <= waited <= DRAIN_SECONDS + 5
