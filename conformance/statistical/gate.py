"""The gate policy the lane's verdicts follow, versioned: every threshold is here, and a report names its version."""

from dataclasses import asdict, dataclass
from typing import Any

from conformance.engine import Severity

__all__ = ["GATE", "GatePolicy"]


@dataclass(frozen=True)
class GatePolicy:
    version: str
    severities: dict[str, Severity]  # what a check's failure does to the verdict
    reach_tolerance: float  # of the reward span: an episode this close to the maximum reaches it
    headroom_margin: float  # of the span: the best non-oracle mean stays this far below the maximum
    floor_margin: float  # of the span, when the manifest declares no validation.reward.floor_margin
    min_gap: float  # of the span: the honest best beats the best adversarial mean by at least this
    variance_tolerance: float  # a replay's reward may differ by this much (absolute), for a deterministic reward
    judged_tolerance: float  # and by this much, for an LLM-judged one (capabilities.llm_judged)
    min_signal_share: float  # the expected share of GRPO groups with a non-zero advantage

    def described(self) -> dict[str, Any]:
        return asdict(self)


GATE = GatePolicy(
    version="statistical-v1",
    severities={
        "statistical.reward_reachability": Severity.FAIL,
        "statistical.difficulty_separation": Severity.WARN,
        "statistical.headroom": Severity.WARN,
        "statistical.variance_bound": Severity.FAIL,
        "statistical.training_signal": Severity.FAIL,
        "statistical.adversarial_floor": Severity.FAIL,
        "statistical.gameability_gap": Severity.WARN,
    },
    reach_tolerance=1e-6,
    headroom_margin=0.05,
    floor_margin=0.05,
    min_gap=0.1,
    variance_tolerance=1e-9,
    judged_tolerance=0.1,
    min_signal_share=0.1,
)
