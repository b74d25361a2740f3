import math

import pytest

from evals.summary import EpisodeFigures, summarize, t_975


def episode(
    reward: float,
    *,
    final: float | None = None,
    steps: int = 5,
    invalid: int = 0,
    done: bool = True,
    success: bool | None = None,
    tokens: int = 10,
) -> EpisodeFigures:
    return EpisodeFigures(reward, reward if final is None else final, success, steps, invalid, tokens, done)


def test_mean_reward_has_a_student_t_interval() -> None:
    summary = summarize([episode(1), episode(0), episode(1), episode(1)], wall_s=2.5)
    assert summary.episodes == 4
    assert summary.mean_reward == pytest.approx(0.75)
    # sample standard deviation 0.5, t(3) = 3.182, n = 4
    assert summary.ci95 == pytest.approx(3.182 * 0.5 / 2)
    assert summary.success_rate == pytest.approx(0.75)
    assert summary.wall_s == 2.5


def test_success_is_a_positive_final_reward_unless_the_environment_says() -> None:
    episodes = [
        episode(1.0),  # done with a positive final reward
        episode(2.0, final=0.0),  # scored along the way, but ended on nothing
        episode(1.0, done=False),  # cut short: not a success
        episode(0.0, success=True),  # the environment's own word wins
    ]
    assert summarize(episodes, 1).success_rate == pytest.approx(0.5)


def test_invalid_rate_is_per_action_tried_and_tokens_add_up() -> None:
    summary = summarize([episode(0, steps=8, invalid=2, tokens=100), episode(0, steps=10, invalid=0, tokens=50)], 1)
    assert summary.invalid_rate == pytest.approx(2 / 20)
    assert summary.mean_steps == 9
    assert summary.tokens == 150
    assert summary.completed == 2


def test_one_episode_has_no_interval_and_none_has_no_figures() -> None:
    assert summarize([episode(0.5)], 1).ci95 is None
    empty = summarize([], 0)
    assert (empty.episodes, empty.mean_reward, empty.success_rate) == (0, None, None)


@pytest.mark.parametrize(("df", "expected"), [(1, 12.706), (9, 2.262), (30, 2.042), (25, 2.060), (1000, 1.962)])
def test_t_critical_values(df: int, expected: float) -> None:
    assert t_975(df) == pytest.approx(expected, abs=0.004)
    assert t_975(10**9) == pytest.approx(1.96, abs=1e-6)
    assert not math.isnan(t_975(121))
