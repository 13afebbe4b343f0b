"""The gRPC side: Envoy's ext_proc ExternalProcessor, fed in observability mode.

One gRPC stream per HTTP exchange; the filter's initial metadata names whose exchange it is. Messages
arrive as request_headers, request_body chunks, response_headers, response_body chunks. The
processor never answers (in observability mode Envoy ignores ProcessingResponses) and returns as
soon as it has the response's end, or needs nothing more: otherwise Envoy would hold the stream
up to its deferred close timeout.

Bodies are kept in memory only, bounded by maxBodyBytes each and, with everything held, by
maxBufferedBytes while they accumulate (past it the exchange is dropped as `memory`); they are
never logged or written. Logs carry counts and error types, never payloads or their error messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Final, Literal

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc

from inference_comparator.join import Exchange, Joiner

log = logging.getLogger("inference_comparator")

NAMESPACE_KEY: Final = "x-inference-namespace"
MODEL_KEY: Final = "x-inference-model"
VERSION_KEY: Final = "x-inference-version"
REQUEST_ID_HEADER: Final = "x-request-id"
EXPIRE_INTERVAL_SECONDS: Final = 1.0
# Streams open at once. A stream is open as long as its HTTP exchange (request rate x latency: 100
# at 1,000 requests/s of 100 ms; 500 at 50/s of an LLM's 10 s). What gRPC and protobuf hold per
# open stream lies outside the byte bound, so past this a new stream is closed at once and counted
# (dropped, overload) rather than let their number, and the memory, grow without end.
MAX_OPEN_STREAMS: Final = 4096


def _headers(http_headers: Any) -> dict[str, str]:
    """An HttpHeaders message's headers by lower-case name (raw_value, else value)."""
    headers: dict[str, str] = {}
    for header in http_headers.headers.headers:
        raw = header.raw_value
        headers[header.key.lower()] = raw.decode("utf-8", "replace") if raw else header.value
    return headers


def _metadata(context: Any) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        metadata[key.lower()] = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return metadata


class ExternalProcessor:
    """envoy.service.ext_proc.v3.ExternalProcessor: each stream's parts into one Exchange for the joiner."""

    def __init__(self, joiner: Joiner) -> None:
        self._joiner = joiner
        self.streams = 0  # streams handled, for the shutdown log line
        self.open = 0

    async def Process(self, request_iterator: AsyncIterator[Any], context: Any) -> None:  # noqa: N802 (gRPC's name)
        self.streams += 1
        if self.open >= MAX_OPEN_STREAMS:
            self._joiner.dropped("overload")
            return
        self.open += 1
        try:
            await self._process(request_iterator, context)
        except asyncio.CancelledError:  # Envoy reset the stream, or the server is stopping
            self._joiner.dropped("incomplete")
            raise
        except grpc.aio.AioRpcError as error:
            log.debug("stream broke: %s", error.code())
            self._joiner.dropped("incomplete")
        except Exception as error:  # never crash on one exchange; never log what it carried
            log.error("exchange failed: %s", type(error).__name__)
            self._joiner.dropped("internal_error")
        finally:
            self.open -= 1

    async def _process(self, request_iterator: AsyncIterator[Any], context: Any) -> None:
        joiner = self._joiner
        metadata = _metadata(context)
        namespace, model, version = metadata.get(NAMESPACE_KEY), metadata.get(MODEL_KEY), metadata.get(VERSION_KEY)
        messages = aiter(request_iterator)
        first = await anext(messages, None)
        if first is None or first.WhichOneof("request") != "request_headers":
            joiner.dropped("incomplete")
            return
        request_id = _headers(first.request_headers).get(REQUEST_ID_HEADER)
        if not joiner.admit(namespace, model, version, request_id):
            return  # not wanted (counted, unless merely not sampled): close the stream now
        parts = _Parts(joiner)
        outcome: _Outcome = "more"
        try:
            async for message in messages:
                outcome = parts.feed(message)
                if outcome != "more":
                    break
        finally:
            joiner.release_in_flight(parts.reserved)
        if outcome in ("body_too_large", "memory"):
            joiner.dropped(outcome)
        elif outcome != "complete" or parts.status is None or namespace is None or model is None or version is None:
            joiner.dropped("incomplete")
        else:
            joiner.add(
                Exchange(
                    namespace=namespace,
                    model=model,
                    version=version,
                    request_id=request_id,
                    status=parts.status,
                    request_body=bytes(parts.request_body),
                    response_body=bytes(parts.response_body),
                )
            )


_Outcome = Literal["more", "complete", "incomplete", "body_too_large", "memory"]


class _Parts:
    """One stream's parts after its request headers, as they arrive; their bodies' bytes counted
    against the joiner's memory bound as they come (`reserved`, for the caller to release)."""

    def __init__(self, joiner: Joiner) -> None:
        self.joiner = joiner
        self.limit = joiner.max_body_bytes
        self.reserved = 0
        self.status: int | None = None
        self.request_body = bytearray()
        self.response_body = bytearray()

    def _take(self, body: bytearray, chunk: bytes) -> bool:
        if not self.joiner.reserve_in_flight(len(chunk)):
            return False
        self.reserved += len(chunk)
        body += chunk
        return True

    def feed(self, message: Any) -> _Outcome:
        """Take one message: whether more are needed, the exchange is complete, or it is given up."""
        kind = message.WhichOneof("request")
        if kind == "request_body":
            if self.status is not None:
                return "incomplete"  # request body after the response began: not an order Envoy sends
            chunk = message.request_body.body
            if len(self.request_body) + len(chunk) > self.limit:
                return "body_too_large"
            return "more" if self._take(self.request_body, chunk) else "memory"
        if kind == "response_headers":
            try:
                self.status = int(_headers(message.response_headers).get(":status", ""))
            except ValueError:
                return "incomplete"
            return "complete" if message.response_headers.end_of_stream else "more"  # eos: no body
        if kind == "response_body":
            if self.status is None:
                return "incomplete"
            chunk = message.response_body.body
            if len(self.response_body) + len(chunk) > self.limit:
                return "body_too_large"
            if not self._take(self.response_body, chunk):
                return "memory"
            return "complete" if message.response_body.end_of_stream else "more"
        if kind == "request_headers":
            return "incomplete"  # a second exchange on one stream: not one this understands
        return "more"  # trailers, and anything newer, carry nothing the comparison needs


async def _expire_forever(joiner: Joiner) -> None:
    while True:
        await asyncio.sleep(EXPIRE_INTERVAL_SECONDS)
        try:
            joiner.expire()
        except Exception as error:  # keep expiring whatever one pass tripped on
            log.error("expiry failed: %s", type(error).__name__)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def serve(joiner: Joiner, host: str, port: int, stop: asyncio.Event, grace_seconds: float = 2.0) -> None:
    """Serve ExternalProcessor on host:port until `stop` is set, then stop within grace_seconds.
    Raises RuntimeError when the port cannot be bound."""
    # Body chunks are at most Envoy's buffer limit; leave room for a whole body in one message.
    message_limit = max(4 * 1024 * 1024, joiner.max_body_bytes + 64 * 1024)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", message_limit), ("grpc.so_reuseport", 0)])
    processor = ExternalProcessor(joiner)
    external_processor_pb2_grpc.add_ExternalProcessorServicer_to_server(processor, server)
    if server.add_insecure_port(_address(host, port)) == 0:
        raise RuntimeError(f"cannot listen on {_address(host, port)}")
    await server.start()
    log.info("ext_proc listening on %s", _address(host, port))
    expiry = asyncio.create_task(_expire_forever(joiner))
    try:
        await stop.wait()
    finally:
        log.info("stopping after %d streams", processor.streams)
        expiry.cancel()
        await server.stop(grace_seconds)
