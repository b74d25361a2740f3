"""The operational figures of a quality report: cold start, steps per second at 1 and 8 sessions, the sessions
the server holds at once, and memory per session where the backend can see it. Measured, never judged.

Throughput steps replay a termination episode's actions (resetting when it ends), after the sessions are
open. The capacity probe opens sessions until the server refuses one or the bound; a session that gets no
answer within a few seconds is waiting for a slot (a pool queues sessions instead of refusing them).
"""

import asyncio
import time
from contextlib import AsyncExitStack
from typing import Any

from conformance.quality.episodes import reset_turn, step_turn
from conformance.quality.run import Run
from conformance.report import Figures
from envclient.ws import AtCapacity, PinnedClient, SessionError

__all__ = ["CAPACITY_BOUND", "SESSIONS", "measure_figures"]

SESSIONS = (1, 8)
THROUGHPUT_S = 0.5
CAPACITY_BOUND = 16
OPEN_TIMEOUT_S = 3.0
MIB = 1024 * 1024


async def _open(run: Run, stack: AsyncExitStack, label: str, seed: int) -> PinnedClient:
    """A session that has been reset, its reply awaited only briefly: a queued one never answers."""
    session = await stack.enter_async_context(run.session(timeout_s=min(run.timeout_s, OPEN_TIMEOUT_S)))
    await reset_turn(session, seed=seed, episode_id=run.episode_id(label))
    session.message_timeout_s = run.timeout_s
    return session


async def _open_many(run: Run, stack: AsyncExitStack, count: int, label: str) -> tuple[list[PinnedClient], str | None]:
    """Up to count sessions, and why no more opened (None when all did)."""
    opened: list[PinnedClient] = []
    for n in range(count):
        try:
            opened.append(await _open(run, stack, f"{label}{n + 1}", n))
        except AtCapacity as exc:
            return opened, f"session {n + 1} was refused ({exc.data.get('message') or 'CAPACITY_REACHED'})"
        except SessionError as exc:
            return opened, f"session {n + 1} got no answer in time ({exc}): it was waiting for a free slot"
    return opened, None


async def _steps(session: PinnedClient, actions: list[dict[str, Any]], until: float, seed: int) -> int:
    steps = 0
    while time.monotonic() < until:
        for action in actions:
            turn = await step_turn(session, action)
            steps += 1
            if turn.done or time.monotonic() >= until:
                break
        seed += 1000
        await reset_turn(session, seed=seed)
    return steps


async def _throughput(run: Run, count: int, actions: list[dict[str, Any]], notes: list[str]) -> float | None:
    async with AsyncExitStack() as stack:
        opened, short = await _open_many(run, stack, count, f"throughput{count}")
        if short is not None:
            notes.append(f"steps per second at {count} sessions ran on {len(opened)}: {short}")
        if not opened:
            return None
        started = time.monotonic()
        counted = await asyncio.gather(*(_steps(s, actions, started + THROUGHPUT_S, n) for n, s in enumerate(opened)))
        return round(sum(counted) / (time.monotonic() - started), 1)


async def _memory(run: Run) -> int | None:
    return await asyncio.to_thread(run.target.memory) if run.target.memory is not None else None


async def _capacity(run: Run, notes: list[str]) -> tuple[int, bool, float | None]:
    """Sessions held at once, whether the server refused one, and the memory each took (MiB) if visible."""
    before = await _memory(run)
    async with AsyncExitStack() as stack:
        opened, short = await _open_many(run, stack, CAPACITY_BOUND, "capacity")
        after = await _memory(run) if before is not None else None
    if short is not None:
        notes.append(f"capacity: {short}")
    else:
        notes.append(f"capacity: the probe stopped at {CAPACITY_BOUND} open sessions, none refused")
    per_session = None
    if before is not None and after is not None and opened:
        per_session = round(max(after - before, 0) / len(opened) / MIB, 3)
    elif run.target.memory is None:
        notes.append("memory per session: not visible here (envhub sees the memory of process-backend servers only)")
    return len(opened), short is not None, per_session


async def measure_figures(run: Run) -> Figures:
    started = time.monotonic()
    notes: list[str] = []
    cold, cold_from = (run.target.cold_start_s, "launch") if run.target.cold_start_s is not None else (None, None)
    if cold is None and run.first_reset_s is not None:
        cold, cold_from = round(run.first_reset_s, 3), "reset"
    figures: dict[str, Any] = {"cold_start_s": cold, "cold_start_from": cold_from, "steps_per_s": {}}
    if run.dead is not None:
        notes.append(f"not measured: {run.dead}")
        return Figures(**figures, notes=notes, duration_s=round(time.monotonic() - started, 3))
    actions = run.reference.actions if run.reference is not None else []
    try:
        async with asyncio.timeout(max(run.remaining(), 0.01)):
            if actions:
                for count in SESSIONS:
                    rate = await _throughput(run, count, actions, notes)
                    if rate is not None:
                        figures["steps_per_s"][str(count)] = rate
            else:
                notes.append("steps per second: no episode to replay (runtime.episode_termination played none)")
            capacity, reached, per_session = await _capacity(run, notes)
            figures |= {"capacity": capacity, "capacity_reached": reached, "memory_per_session_mb": per_session}
    except TimeoutError:
        notes.append("not all measured: the report's deadline passed")
    except SessionError as exc:
        notes.append(f"not all measured: {exc}")
    return Figures(**figures, notes=notes, duration_s=round(time.monotonic() - started, 3))
