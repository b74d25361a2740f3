"""The stable codes beside an endpoint's status message and its pool's events: programs read these, people the
message (which may be reworded). A launch that failed carries its error's code (core.errors) instead."""

# An endpoint's row, by its status: starting, running, stopping, stopped or failed.
STARTING = "starting"
STARTING_AGAIN = "starting_again"  # its servers were gone (envhub restarted elsewhere): it starts under its id
WAITING_FOR_ENVHUB = "waiting_for_envhub"  # envhub stopped: it starts again under its id when envhub starts
RUNNING = "running"
REPLACING_REPLICA = "replacing_replica"  # running, and a lost replica is being replaced
STOPPING = "stopping"
STOPPED_ON_REQUEST = "stopped_on_request"  # by its owner or the admin
IDLE_STOPPED = "idle_stopped"  # no sessions for the idle time
RUN_DONE = "run_done"  # the evaluation, board submission or report that launched it is done with it
CANNOT_START_AGAIN = "cannot_start_again"  # its servers were gone, and it cannot start here again
STOPPED_WITH_ENVHUB = "stopped_with_envhub"  # launched with secrets, which envhub does not keep when it stops
REPLICAS_KEEP_DYING = "replicas_keep_dying"  # too many replicas lost in a short time: failed, not replaced again
STOPPED_WHILE_STARTING = "stopped_while_starting"

# A pool's events (their kind says what the pool did; these say why).
REPLICA_STARTED = "replica_started"
REPLICA_DIED = "replica_died"  # its server exited or was killed
REPLICA_HUNG = "replica_hung"  # its server stopped answering /health
REPLICA_IDLE = "replica_idle"  # drained and stopped after the pool's idle time
SWARM_ASKED = "swarm_asked"  # the swarm was asked for another number of tasks
LAUNCHED_WITH_SECRETS = "launched_with_secrets"  # no replica can start here: envhub does not keep secrets
