"""The sync benchmark's fake Hub, served from its own process and driven through a pipe.

Serving from a separate process keeps the server's Python threads off the sync's GIL, as
the real Hub would be. The parent asks for request counts and changes through the pipe.
"""

import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from bench.corpus import Corpus
from tests.fakehub import FakeHub

__all__ = ["Change", "Clear", "Command", "Count", "CpuTime", "Ready", "Stop", "serve"]


@dataclass(frozen=True)
class Ready:
    url: str
    spaces: int
    datasets: int
    dataset_tags: dict[str, int]
    seconds: float


@dataclass(frozen=True)
class Count:
    """Answered with the number of requests whose path starts with `prefix`."""

    prefix: str = ""


@dataclass(frozen=True)
class Clear:
    """Forget the requests counted so far; answered with None."""


@dataclass(frozen=True)
class Change:
    """Edit the README of every `every`-th Space (a new commit); answered with their ids."""

    every: int


@dataclass(frozen=True)
class CpuTime:
    """Answered with the CPU seconds the fake Hub's process has used so far."""


@dataclass(frozen=True)
class Stop:
    """Stop serving; answered with None."""


Command = Count | Clear | Change | CpuTime | Stop


def serve(conn: Connection, spaces: int, seed: int, page_size: int) -> None:
    """Build the fake Hub, report its URL, then answer commands until told to stop."""
    started = time.perf_counter()
    corpus = Corpus(seed)
    hub = FakeHub(page_size=page_size)
    specs = list(corpus.spaces(spaces))
    for spec in specs:
        hub.add_space(
            spec.id,
            files=spec.files(),
            tags=spec.tags,
            likes=spec.likes,
            trending_score=round(spec.trending_score),  # the Hub scores trending in whole numbers
            author=spec.author,
            last_modified=spec.last_modified.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        )
    dataset_tags: dict[str, int] = {}
    for index in range(len(corpus.dataset_ids)):
        dataset = corpus.dataset(index)
        for tag in dataset["tags"]:
            dataset_tags[tag] = dataset_tags.get(tag, 0) + 1
        hub.add_dataset(**dataset)
    with hub:
        conn.send(Ready(hub.url, len(specs), len(corpus.dataset_ids), dataset_tags, time.perf_counter() - started))
        while True:
            command: Command = conn.recv()
            if isinstance(command, Count):
                conn.send(hub.count(command.prefix))
            elif isinstance(command, Clear):
                hub.clear_requests()
                conn.send(None)
            elif isinstance(command, Change):
                changed = specs[:: command.every]
                for spec in changed:
                    note = "\n## Changelog\n\n- The reward no longer counts invalid moves.\n"
                    hub.update_space(spec.id, files={"README.md": spec.readme + note})
                conn.send([spec.id for spec in changed])
            elif isinstance(command, CpuTime):
                conn.send(time.process_time())
            else:
                conn.send(None)
                return
