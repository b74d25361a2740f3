"""The relay's session as a state machine over fake sockets: what it holds, replays, answers, pings and pauses.

Both legs sit on transports of the test's own that record what is written to them; bytes "arrive" by calling the
leg as asyncio would. The live tests (test_gateway.py, test_gateway_faults.py) cover the same over real sockets.
"""

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

from gateway.legs import Leg
from gateway.relay import Session
from gateway.traffic import Traffic
from gateway.wire import BINARY, CLOSE, PING, PONG, TEXT, Cutter, frame
from protocol.frames import capacity_frame
from tests.clock import ManualTimers

RESET = json.dumps({"type": "reset", "data": {}}).encode()
OBSERVATION = json.dumps({"type": "observation", "data": {"observation": {}}}).encode()


class FakeTransport(asyncio.Transport):
    """A socket that keeps what is written to it, and tells its leg when it closes."""

    def __init__(self, leg: Leg) -> None:
        super().__init__()
        self.leg = leg
        self.written = bytearray()
        self.closing = self.aborted = self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def can_write_eof(self) -> bool:
        return False  # as a TLS socket: a close shuts it whole

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.leg.connection_lost, None)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def frames(self) -> list[tuple[int, bytes]]:
        """The (opcode, payload) of each whole frame written, unmasked."""
        found = []
        for head in Cutter().feed(bytes(self.written)):
            found.append((head.opcode, head.payload(head.length)))
        return found


def leg(*, client_side: bool, now: Callable[[], float] = time.monotonic) -> tuple[Leg, FakeTransport]:
    made = Leg(client_side=client_side, now=now)
    transport = FakeTransport(made)
    made.connection_made(transport)
    return made, transport


def from_client(opcode: int, payload: bytes) -> bytes:
    return frame(opcode, payload, masked=True)


def from_server(opcode: int, payload: bytes) -> bytes:
    return frame(opcode, payload, masked=False)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def finish(session: Session, running: "asyncio.Future[str]", lost: "asyncio.Future[str]") -> None:
    """End a session the test leaves running: its replica is lost, the client told, both sockets shut."""
    lost.set_result("the test is over")
    assert await running == "ended"
    session.end()


def session_of(client: Leg, ping_s: float = 60) -> Session:
    return Session("e", client, Traffic(), ping_s)


def test_what_the_client_sends_before_a_replica_takes_it_is_held_and_played_to_it() -> None:
    async def test() -> None:
        client, to_client = leg(client_side=True)
        session = session_of(client)
        client.data_received(from_client(TEXT, RESET))
        replica, to_replica = leg(client_side=False)
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        running = asyncio.ensure_future(session.run(replica, lost, lambda: None))
        await settle()
        assert to_replica.frames() == [(TEXT, RESET)]
        replica.data_received(from_server(TEXT, OBSERVATION))
        await settle()
        assert to_client.frames() == [(TEXT, OBSERVATION)] and session.confirmed
        client.data_received(from_client(CLOSE, b"\x03\xe8"))
        replica.data_received(from_server(CLOSE, b"\x03\xe8"))
        assert await running == "ended"
        session.end()

    run(test)


def test_a_refusal_goes_no_further_and_the_held_bytes_go_to_the_next_replica() -> None:
    async def test() -> None:
        client, to_client = leg(client_side=True)
        session = session_of(client)
        client.data_received(from_client(TEXT, RESET))
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        full, to_full = leg(client_side=False)
        refusing = asyncio.ensure_future(session.run(full, lost, lambda: None))
        await settle()
        refusal = json.dumps(capacity_frame("at capacity", 1, 1)).encode()
        full.data_received(from_server(TEXT, refusal))
        assert await refusing == "refused"
        assert to_full.aborted and bytes(to_client.written) == b""  # the client never saw it
        assert session.refused is not None and session.refused["max_sessions"] == 1
        free, to_free = leg(client_side=False)
        running = asyncio.ensure_future(session.run(free, lost, lambda: None))
        await settle()
        assert to_free.frames() == [(TEXT, RESET)]  # played again, whole
        await finish(session, running, lost)

    run(test)


def test_a_first_frame_that_claims_to_be_endless_is_passed_on_not_gathered() -> None:
    async def test() -> None:
        client, to_client = leg(client_side=True)
        session = session_of(client)
        replica, _ = leg(client_side=False)
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        running = asyncio.ensure_future(session.run(replica, lost, lambda: None))
        await settle()
        header = bytes([0x80 | BINARY, 127]) + (1 << 62).to_bytes(8, "big")
        replica.data_received(header + b"x" * 1000)
        replica.data_received(b"y" * 100_000)
        assert session.confirmed  # no refusal is that long: it answered
        assert bytes(to_client.written) == header + b"x" * 1000 + b"y" * 100_000
        await finish(session, running, lost)

    run(test)


def test_while_a_session_waits_envhub_answers_its_pings_and_pings_it() -> None:
    async def test() -> None:
        timers = ManualTimers()
        client, to_client = leg(client_side=True, now=timers.now)
        session = Session("e", client, Traffic(), 20, timers=timers)
        client.data_received(from_client(PING, b"are you there"))
        assert to_client.frames() == [(PONG, b"are you there")]
        timers.advance(10)  # quiet for half an interval: envhub pings it
        assert (PING, b"envhub") in to_client.frames()
        timers.advance(10)
        assert not to_client.aborted
        timers.advance(10)  # and the ping went unanswered for an interval: it is gone
        assert to_client.aborted
        session.end()

    run(test)


def test_a_client_that_asks_for_no_work_is_no_load_until_it_does() -> None:
    async def test() -> None:
        client, _ = leg(client_side=True)
        session = session_of(client)
        told: list[str] = []
        session.on_active = lambda: told.append("active")
        client.data_received(from_client(PING, b""))
        client.data_received(from_client(TEXT, b"junk"))
        client.data_received(from_client(BINARY, RESET))  # openenv's messages are text
        client.data_received(from_client(TEXT, b'{"type": "state"}'))
        assert not session.active and told == []
        client.data_received(from_client(TEXT, RESET))
        client.data_received(from_client(TEXT, RESET))
        assert session.active and told == ["active"]  # told once
        session.end()

    run(test)


def test_a_replica_that_cannot_keep_up_pauses_the_client_and_a_waiting_client_parks_little() -> None:
    async def test() -> None:
        client, to_client = leg(client_side=True)
        session = session_of(client)
        client.data_received(from_client(BINARY, b"z" * (70 * 1024)))
        assert to_client.paused  # waiting, it parks at most 64 KiB
        replica, to_replica = leg(client_side=False)
        lost: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        running = asyncio.ensure_future(session.run(replica, lost, lambda: None))
        await settle()
        assert not to_client.paused  # placed: it may send on
        replica.data_received(from_server(TEXT, OBSERVATION))
        replica.pause_writing()  # the replica's socket is full: stop reading the client
        assert to_client.paused
        replica.resume_writing()
        assert not to_client.paused
        assert len(to_replica.written) > 70 * 1024
        await finish(session, running, lost)

    run(test)
