"""The load generator's client-side truth: what counts as the first token of a streamed completion."""

from __future__ import annotations

import json
import time

from tests.integration.loadgen import RequestRecord, _Connection, _stream_completion
from tests.support import RouteServer


def _streaming(chunks: list[tuple[float, dict]]):
    """A /v1/completions stand-in that sends each chunk after its delay as its own HTTP chunk, as
    vLLM's server (uvicorn, chunked transfer encoding) streams them."""

    def write_chunk(handler, data: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()

    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for delay, chunk in chunks:
            time.sleep(delay)
            write_chunk(handler, b"data: " + json.dumps(chunk).encode() + b"\n\n")
        write_chunk(handler, b"data: [DONE]\n\n")
        write_chunk(handler, b"")

    return respond


def test_a_token_without_text_is_the_first_token_and_text_comes_later() -> None:
    """vLLM streams a token that decodes to no text yet (a byte of a multi-byte character) as a
    choice with text "": that is the token vLLM's own TTFT counts, so the client's TTFT is its
    arrival; the first text is recorded apart."""
    chunks = [
        (0.05, {"choices": [{"index": 0, "text": "", "finish_reason": None}]}),
        (0.40, {"choices": [{"index": 0, "text": "\ufffdka", "finish_reason": None}]}),
        (0.01, {"choices": [{"index": 0, "text": " lo", "finish_reason": "length"}]}),
        (0.01, {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}),
    ]
    server = RouteServer({"/v1/completions": _streaming(chunks)})
    try:
        record = RequestRecord(started=time.time(), prompt_words=5, max_tokens=3, shared_prefix=False)
        connection = _Connection(server.url(""), 10.0)
        try:
            _stream_completion(connection, "/v1/completions", {}, record, 10.0)
        finally:
            connection.close()
    finally:
        server.close()
    assert record.error is None and record.completion_tokens == 3
    assert record.ttft_s is not None and record.first_text_s is not None
    # Strictly earlier: had TTFT waited for text, both would be the same reading. No bound in
    # seconds: on a busy machine the client may read both chunks late and close together.
    assert record.ttft_s < record.first_text_s <= record.e2e_s


def test_a_kept_alive_connection_the_server_closed_is_sent_again_on_a_new_one() -> None:
    """uvicorn closes a connection left idle for 5 s without a word; the next request on it fails
    before any response. The server never took it, so the client sends it once more."""
    stream = _streaming([(0.0, {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}})])
    served = []

    def respond_then_hang_up(handler) -> None:
        stream(handler)
        served.append(handler.client_address)
        handler.close_connection = True  # closed after the answer, without `Connection: close`

    server = RouteServer({"/v1/completions": respond_then_hang_up})
    connection = _Connection(server.url(""), 10.0)
    records = [RequestRecord(started=time.time(), prompt_words=5, max_tokens=1, shared_prefix=False) for _ in range(2)]
    try:
        for record in records:
            _stream_completion(connection, "/v1/completions", {}, record, 10.0)
    finally:
        connection.close()
        server.close()
    assert [r.error for r in records] == [None, None] and [r.completion_tokens for r in records] == [1, 1]
    assert len(served) == 2 and served[0] != served[1]  # the second came on a new connection
