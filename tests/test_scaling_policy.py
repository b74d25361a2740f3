"""The scaler's decision as a pure function: within min and max, replacing what is missing, growing for load,
shrinking only by replicas idle long enough."""

from hosting.options import ReplicaRange
from hosting.scaling import Sizing, sizing

POOL = ReplicaRange(min=2, max=6)
READY = {"a", "b", "c", "d"}


def test_a_pool_below_its_min_replaces_and_one_under_load_grows_up_to_its_max() -> None:
    assert sizing(POOL, 1, 0, {"a"}, []) == Sizing(grow_to=2, kind="replace")
    assert sizing(POOL, 2, 4, {"a", "b"}, []) == Sizing(grow_to=4, kind="grow")
    assert sizing(POOL, 4, 40, READY, []) == Sizing(grow_to=6, kind="grow")  # never past max
    assert sizing(POOL, 6, 40, READY | {"e", "f"}, []) == Sizing()


def test_a_pool_shrinks_only_by_idle_ready_replicas_and_never_below_what_its_load_wants() -> None:
    assert sizing(POOL, 4, 0, READY, ["c", "a", "x"]) == Sizing(drain=("c", "a"))  # down to min, longest idle first
    assert sizing(POOL, 4, 3, READY, ["c", "a"]) == Sizing(drain=("c",))  # the load still wants three
    assert sizing(POOL, 4, 0, READY, []) == Sizing()  # none idle long enough: nothing to drain
    assert sizing(POOL, 4, 0, {"a", "b"}, ["c", "d"]) == Sizing()  # still starting: not drained
