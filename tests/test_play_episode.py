"""An episode's totals, history and JSONL export."""

import json

from app.usecases.play_episode import Episode, Outcome


def test_an_episode_in_jsonl() -> None:
    episode = Episode("template:count", "http://127.0.0.1:1/endpoints/abc")
    episode.reset({"seed": 3}, Outcome({"total": 0}, 0.0, False), 2.5)
    episode.step({"add": 4}, Outcome({"total": 4}, 0.25, False), 1.0)
    episode.step({"add": 6}, Outcome({"total": 10}, 1.0, True, {"note": "won"}), 1.0)
    assert (episode.steps, episode.cumulative_reward, episode.done) == (2, 1.25, True)

    lines = [json.loads(line) for line in episode.to_jsonl().splitlines()]
    assert lines[0] == {
        "kind": "episode",
        "environment": "template:count",
        "url": "http://127.0.0.1:1/endpoints/abc",
        "records": 3,
    }
    assert [(r["kind"], r["index"], r["step"]) for r in lines[1:]] == [("reset", 0, 0), ("step", 1, 1), ("step", 2, 2)]
    assert lines[1]["options"] == {"seed": 3} and lines[2]["action"] == {"add": 4}
    assert [r["cumulative_reward"] for r in lines[1:]] == [0.0, 0.25, 1.25]
    assert lines[3]["observation"] == {"total": 10} and lines[3]["done"] and lines[3]["metadata"] == {"note": "won"}
    assert episode.history_rows()[0] == [2, '{"add": 6}', 1.0, True, 1.25]
    assert episode.history_rows()[-1] == ["reset", '{"seed": 3}', 0.0, False, 0.0]


def test_a_reset_starts_over_and_missing_rewards_count_as_nothing() -> None:
    episode = Episode("e", "u")
    episode.reset({}, Outcome({}, None, False), 1)
    episode.step({}, Outcome({}, None, False), 1)
    episode.step({}, Outcome({}, True, False), 1)  # openenv allows bool rewards
    assert episode.cumulative_reward == 1.0
    episode.reset({"seed": 1}, Outcome({}, 0.0, False), 1)
    assert (len(episode.records), episode.steps, episode.cumulative_reward) == (1, 0, 0.0)
