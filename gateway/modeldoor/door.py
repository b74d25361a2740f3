"""The model door: an agent run's harness calls its model at envhub (`/model/v1/chat/completions`, `/responses`,
`/messages`) with the run's credential as its API key; the door passes each call on to the run's preset's server
with the preset's model and key (which never leave envhub), streams the answer back as it comes, and records it.

A streamed answer's bytes go to the harness as they arrive; the door reads the same bytes beside, to assemble the
call's record. Only the first event waits to be read whole before the answer starts: an upstream that answers
something else than the dialect's events is then told apart (502 model_garbage) while the status can still say so.
"""

import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.types import Receive, Scope, Send

from core.clock import utcnow
from core.errors import EnvhubError
from core.headers import bearer
from core.outbound import OutboundGuard, OutboundSession, read_capped
from gateway.modeldoor.answers import CHAT, Assembly, Events, error_body, is_answer, summary
from gateway.modeldoor.tickets import Call, Runs, Ticket

__all__ = ["DIALECT_PATHS", "ModelDoor"]

log = logging.getLogger("envhub.modeldoor")

DIALECT_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}
UPSTREAM_PATHS = {dialect: path.removeprefix("/v1") for path, dialect in DIALECT_PATHS.items()}
CLIENT_SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "x-session-id")
PASSED_ON = ("anthropic-version", "anthropic-beta")  # what an Anthropic server reads of the harness's headers
KEPT_SESSIONS = 64  # runs whose outbound session (its pinned address) stays open


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes | dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class Refusal(Exception):
    """The door answers for the model: the status, envhub's code, and what to do."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _credential(headers: dict[str, str]) -> str:
    return bearer(headers) or headers.get("x-api-key", "").strip()


def _over_limit(ticket: Ticket) -> str | None:
    if ticket.calls >= ticket.max_calls:
        return f"the run made {ticket.calls} model calls, its limit"
    if ticket.output_tokens >= ticket.max_output_tokens:
        return (
            f"the run's model wrote {ticket.output_tokens} output tokens, past its limit of {ticket.max_output_tokens}"
        )
    if utcnow() >= ticket.deadline:
        return "the run's wall time ran out"
    return None


class ModelDoor:
    """The ASGI app of requests to /model/...: admitted by `runs`, passed on through `guard` (a preset's server is a
    URL a user gave)."""

    def __init__(self, runs: Runs, guard: OutboundGuard, max_body_bytes: int, max_answer_bytes: int) -> None:
        self.runs, self.guard = runs, guard
        self.max_body_bytes, self.max_answer_bytes = max_body_bytes, max_answer_bytes
        self._outbound: OrderedDict[str, OutboundSession] = OrderedDict()

    async def aclose(self) -> None:
        await self.runs.aclose()
        while self._outbound:
            await self._outbound.popitem()[1].aclose()

    async def _session(self, ticket: Ticket) -> OutboundSession:
        """The run's outbound session: its server's address pinned once, its key sent to that server only."""
        session = self._outbound.pop(ticket.run, None)
        if session is None:
            session = OutboundSession(
                self.guard, timeout_s=ticket.timeout_s, credentials={ticket.base_url: ticket.headers}
            )
        self._outbound[ticket.run] = session
        if len(self._outbound) > KEPT_SESSIONS:
            await self._outbound.popitem(last=False)[1].aclose()
        return session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        dialect = next((d for suffix, d in DIALECT_PATHS.items() if path.endswith(suffix)), None)
        if scope["type"] != "http" or dialect is None or scope["method"] != "POST":
            where = "POST /model/v1/chat/completions, /model/v1/responses or /model/v1/messages"
            await _answer(send, 404, error_body(dialect or CHAT, 404, "not_found", f"the model door answers {where}"))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            ticket = await self.runs.admit(_credential(headers))
        except EnvhubError as exc:
            await _answer(send, exc.status_code, error_body(dialect, exc.status_code, exc.code, exc.message))
            return
        started = time.perf_counter()
        call = Call(ticket.run, dialect, False, utcnow(), client_session=_client_session(headers))
        reply: Reply | None = None
        try:
            try:
                reply = await self._serve(ticket, call, headers, receive, send)
            except Refusal as refusal:
                call.status, call.code = refusal.status, refusal.code
                reply = Reply(refusal.status, error_body(dialect, refusal.status, refusal.code, refusal.message))
            except OSError:  # the harness left before its answer was sent: what came of the call is still kept
                call.code = call.code or "client_left"
            finally:
                call.wall_s = time.perf_counter() - started
                # Counted before the answer ends: the harness's next call finds the limit counting this one.
                ticket.output_tokens += int(call.usage.get("output_tokens") or 0)
            with suppress(OSError):
                if reply is not None:
                    await _answer(send, reply.status, reply.body, reply.headers)
                elif call.stream and call.first_token_s is not None:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            # Written after the answer has gone (the harness does not wait for it), in order, flushed on shutdown.
            self.runs.record(call)

    async def _serve(
        self, ticket: Ticket, call: Call, headers: dict[str, str], receive: Receive, send: Send
    ) -> "Reply | None":
        """Pass the call on; its answer to send, or None when it is a stream under way (still to be ended)."""
        body = await self._body(receive)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            raise Refusal(400, "invalid_request", "the body must be a JSON object, as the model API's is")
        call.request, call.stream = request, request.get("stream") is True
        # Checked and counted with no await between: calls at once cannot both take a run's last call.
        if ticket.ended:
            raise Refusal(401, "run_ended", f"agent run {ticket.run} has ended: start a new run")
        reason = _over_limit(ticket)
        if reason is None:
            ticket.calls += 1
        else:
            await self.runs.end(ticket.run, "stopped", "run_limit", reason)
            raise Refusal(429, "run_limit", f"{reason}: the run is stopped; start a new run to go on")
        sent = {**request, "model": ticket.model}
        if ticket.token_ids and call.dialect == CHAT:
            sent |= {"logprobs": True, "return_token_ids": True}
        outbound = await self._session(ticket)
        client = outbound.client
        upstream = client.build_request(
            "POST",
            ticket.base_url.rstrip("/") + UPSTREAM_PATHS[call.dialect],
            content=json.dumps(sent).encode(),
            headers={"content-type": "application/json"} | {k: headers[k] for k in PASSED_ON if k in headers},
        )
        try:
            response = await client.send(upstream, stream=True)
        except httpx.TimeoutException as exc:
            raise Refusal(504, "model_timeout", f"the model server did not answer in {ticket.timeout_s:g} s") from exc
        except (httpx.HTTPError, OSError, EnvhubError) as exc:
            raise Refusal(502, "model_unreachable", f"could not reach the run's model server ({_why(exc)})") from exc
        try:
            if response.status_code == 200 and call.stream and _is_events(response):
                await self._stream(response, call, send)
                return None
            return await self._whole(response, call)
        finally:
            await response.aclose()

    async def _body(self, receive: Receive) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                mib = self.max_body_bytes / 2**20
                raise Refusal(413, "payload_too_large", f"the request is over {mib:g} MiB, the most the door takes")
            if not message.get("more_body"):
                return bytes(body)

    async def _whole(self, response: httpx.Response, call: Call) -> "Reply":
        """An answer read whole: the model's error passed on as it is, an answer recorded as it is."""
        try:
            data, cut = await read_capped(response, self.max_answer_bytes)
        except httpx.HTTPError as exc:
            raise Refusal(502, "model_unreachable", f"the model server's answer broke off ({_why(exc)})") from exc
        status = response.status_code
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        if status == 200 and (cut or not is_answer(call.dialect, answer)):
            raise Refusal(502, "model_garbage", "the model server's answer is not one of its API's answers")
        call.status = status
        if isinstance(answer, dict):
            call.response = answer
            if status == 200:
                _keep(call, answer)
        passed = {k: v for k, v in response.headers.items() if k in ("content-type", "retry-after")}
        return Reply(status, data, passed)

    async def _stream(self, response: httpx.Response, call: Call, send: Send) -> None:
        events, assembly = Events(), Assembly(call.dialect)
        seen, broken = 0, False
        chunks = response.aiter_raw()
        held = bytearray()
        try:
            async for chunk in chunks:  # held until the first whole event says the answer is events of this API
                held += chunk
                if _assembled(events, assembly, chunk):
                    break
                if len(held) > self.max_answer_bytes:
                    raise ValueError("no event")
            else:
                raise ValueError("no event")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Refusal(502, "model_garbage", "the model server's stream is not its API's events") from exc
        except httpx.HTTPError as exc:
            raise Refusal(502, "model_unreachable", f"the model server's answer broke off ({_why(exc)})") from exc
        call.first_token_s = (utcnow() - call.started_at).total_seconds()
        head = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": bytes(held), "more_body": True})
        seen = len(held)
        try:
            async for chunk in _rest(chunks):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                seen += len(chunk)
                if not broken and seen <= self.max_answer_bytes:
                    broken = not _safely_assembled(events, assembly, chunk)
        finally:
            answer = assembly.result()
            call.response = answer
            _keep(call, answer)
            call.code = "model_garbage" if broken else call.code


def _assembled(events: Events, assembly: Assembly, chunk: bytes) -> bool:
    found = events.feed(chunk)
    for name, data in found:
        assembly.feed(name, data)
    return bool(found)


def _safely_assembled(events: Events, assembly: Assembly, chunk: bytes) -> bool:
    try:
        _assembled(events, assembly, chunk)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


async def _rest(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The stream's remaining chunks; its end when the model server cut it."""
    try:
        async for chunk in chunks:
            yield chunk
    except httpx.HTTPError as exc:
        log.warning("a model server's stream broke off: %s", _why(exc))


def _keep(call: Call, answer: dict[str, Any]) -> None:
    try:
        found = summary(call.dialect, answer)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        call.code = "model_garbage"
        return
    call.text, call.tool_calls, call.finish_reason, call.usage = (
        found.text,
        found.tool_calls,
        found.finish_reason,
        found.usage,
    )
    call.prompt_token_ids, call.completion_token_ids = found.prompt_token_ids, found.completion_token_ids
    call.completion_logprobs = found.completion_logprobs


def _is_events(response: httpx.Response) -> bool:
    return str(response.headers.get("content-type", "")).startswith("text/event-stream")


def _client_session(headers: dict[str, str]) -> str | None:
    return next((headers[h][:200] for h in CLIENT_SESSION_HEADERS if headers.get(h)), None)


def _why(exc: BaseException) -> str:
    """What failed, without the request it failed on (its headers carry the preset's key)."""
    return exc.message if isinstance(exc, EnvhubError) else type(exc).__name__


async def _answer(send: Send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = {"content-type": "application/json", **(headers or {})}
    raw = [(k.encode(), v.encode()) for k, v in head.items()] + [(b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})
