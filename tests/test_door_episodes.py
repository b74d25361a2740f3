"""What the MCP door keeps of an episode under way, in memory until it is written: bounded however the client and
the environment fill it."""

import json

from gateway.mcp.episodes import MAX_EPISODE_BYTES, MAX_KEPT, EpisodeLog


def test_an_episode_of_large_steps_keeps_its_first_records_within_its_bytes_and_counts_every_step() -> None:
    episode = EpisodeLog(session="s", index=0)
    large = "x" * (MAX_KEPT - 100)  # kept whole: just under what one value may be
    for step in range(400):
        episode.add("step", {"board": large}, 1.0, False, 1.0, action={"move": large, "step": step})
    kept = episode.record()
    size = sum(len(json.dumps(record, ensure_ascii=False)) for record in kept.records)
    assert size <= MAX_EPISODE_BYTES + 3 * MAX_KEPT  # the last record kept may pass the mark, by one record
    assert kept.steps == 400 and kept.reward == 400.0  # the figures count every step
    assert len(kept.records) + episode.dropped == 400 and episode.dropped > 0
    assert kept.error is not None and str(len(kept.records)) in kept.error
