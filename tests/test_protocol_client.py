"""envhub's one client of the openenv protocol (the Play tab, evaluations and quality reports play through it),
against real servers on loopback: a full server is told apart from a refused message and from a lost session, a
session takes its seat only once the server answers it, and a reply that never comes ends the session."""

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from core.outbound import OutboundGuard, OutboundSession
from envclient.ws import AtCapacity, Lost, PinnedClient, Refused, SessionError
from protocol import frames
from tests import checkservers
from tests.checkservers import count_app, serve

LOCAL = OutboundGuard(allow_private=True)


def played(play: Callable[[OutboundSession], Awaitable[None]]) -> None:
    async def run() -> None:
        outbound = OutboundSession(LOCAL, timeout_s=5)
        try:
            await play(outbound)
        finally:
            await outbound.aclose()

    asyncio.run(run())


def test_a_server_that_refuses_at_capacity_and_hangs_up_is_told_full_and_takes_no_seat() -> None:
    seated: list[str] = []
    with serve(checkservers.ws_full()) as server:

        async def play(outbound: OutboundSession) -> None:
            client = PinnedClient(server.url, outbound, on_answered=lambda: seated.append("full"))
            with pytest.raises(AtCapacity) as refused:
                await client.reset(seed=1)
            assert refused.value.data["code"] == frames.ErrorCode.CAPACITY_REACHED
            assert client.last_error == refused.value.data
            await client.close()

        played(play)
    assert seated == []


def test_a_session_refused_at_capacity_opens_anew_at_its_next_reset_once_a_seat_is_free() -> None:
    seated: list[str] = []
    with serve(count_app(max_sessions=1)) as server:

        async def play(outbound: OutboundSession) -> None:
            first = PinnedClient(server.url, outbound, on_answered=lambda: seated.append("first"))
            second = PinnedClient(server.url, outbound, on_answered=lambda: seated.append("second"))
            await first.reset(seed=1)
            with pytest.raises(AtCapacity) as refused:
                await second.reset(seed=2)
            assert (refused.value.data["active_sessions"], refused.value.data["max_sessions"]) == (1, 1)
            assert seated == ["first"]
            await first.close()
            opened = await second.reset(seed=2)
            stepped = await second.step({"add": 3})
            assert (opened.observation["total"], stepped.observation["total"]) == (0, 3)
            await second.step({"add": 1})
            await second.close()

        played(play)
    assert seated == ["first", "second"]  # each told once, at its first answer


def test_a_refused_action_is_refused_not_lost_and_the_episode_plays_on() -> None:
    with serve(count_app()) as server:

        async def play(outbound: OutboundSession) -> None:
            client = PinnedClient(server.url, outbound)
            await client.reset(seed=1)
            with pytest.raises(Refused) as refused:
                await client.step({"add": "three"})
            assert not isinstance(refused.value, AtCapacity | Lost)
            assert refused.value.data["code"] == frames.ErrorCode.VALIDATION_ERROR
            assert (await client.step({"add": 2})).observation["total"] == 2
            await client.close()

        played(play)


def test_a_reply_that_never_comes_within_a_shorter_timeout_loses_the_session() -> None:
    with serve(checkservers.ws_silent()) as server:

        async def play(outbound: OutboundSession) -> None:
            client = PinnedClient(server.url, outbound, message_timeout_s=60)
            client.message_timeout_s = 0.2  # a probe that will not wait for a queued session
            with pytest.raises(Lost):
                await client.reset(seed=1)
            await client.close()

        played(play)


def test_a_reply_that_is_not_the_protocol_is_a_session_error_not_a_lost_session() -> None:
    with serve(checkservers.ws_garbage()) as server:

        async def play(outbound: OutboundSession) -> None:
            client = PinnedClient(server.url, outbound)
            with pytest.raises(SessionError) as broken:
                await client.reset(seed=1)
            assert not isinstance(broken.value, Lost | Refused)
            await client.close()

        played(play)


def test_a_server_that_hangs_up_instead_of_answering_loses_the_session_and_its_episode() -> None:
    with serve(checkservers.ws_closes_early()) as server:

        async def play(outbound: OutboundSession) -> None:
            client = PinnedClient(server.url, outbound)
            with pytest.raises(Lost):
                await client.reset(seed=1)
            await client.close()

        played(play)
