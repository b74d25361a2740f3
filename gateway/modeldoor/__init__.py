"""The model door: an agent run's harness reaches its model through envhub, which passes each call on to the run's
model preset's server and records it. door: the ASGI app; answers: each dialect's answers, streamed and not, and
error shapes; tickets: what the door needs from envhub (a run's ticket, its calls)."""

from gateway.modeldoor.door import DIALECT_PATHS, ModelDoor
from gateway.modeldoor.tickets import Call, Runs, Ticket

__all__ = ["DIALECT_PATHS", "Call", "ModelDoor", "Runs", "Ticket"]
