"""Everything a running envhub is made of, built once from its settings: the composition root.

Nothing takes this object whole: the API's routes are given their parts by app.api.deps, the page's panels by
app.ui.page, the data plane its port (`gateway`) by app.main, and each use case is built here with what it uses.
Building it connects to nothing; `prepare_catalog` touches only the database and the
template folders; `start` and `stop` run what serving needs (leases, reconcile, the loops).
"""

import asyncio
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import httpx
from sqlalchemy import Engine
from sqlmodel import Session

from app.agent_recorder import AgentRecorder
from app.agent_run_ends import RunEnds
from app.auth.bearers import GatewayBearers
from app.auth.callers import Identities
from app.auth.provider import Provider
from app.auth.sign_in_sessions import SessionStore, session_secret
from app.background import (
    EVALUATIONS_INTERVAL_S,
    WATCH_INTERVAL_S,
    health_round,
    periodically,
    probe_replicas,
    sync_if_due,
    watch_endpoints,
)
from app.made_from_settings import gateway_settings, hub_from_settings, runtimes_from_settings
from app.mcp_door import PooledDoor
from app.model_runs import DoorRuns
from app.settings import Preload, Settings
from app.usecases.evaluations import Evaluator
from app.usecases.harness_jobs import HarnessJobs
from app.usecases.play import PlaySessions
from app.usecases.publish import Publisher
from app.usecases.quality import quality_round
from app.usecases.statistics import Statistics
from app.usecases.submissions import SubmissionQueue
from app.usecases.validation import Validations, validation_round
from catalog.downloads import Downloads
from catalog.hub import Hub
from catalog.local import prepare_catalog
from catalog.sync import Syncer
from catalog.tasksets import Tasksets
from conformance.checker import Checker
from conformance.validator import Validator
from conformance.validator.provider import engine_provider
from core.callers import Access
from core.db import create_db_engine
from core.leases import Leases
from core.outbound import OutboundGuard
from core.sealing import EndpointTokens
from evals.agent_runs import AgentRuns
from evals.agent_sessions import AgentSessions
from evals.presets import ModelPresets
from evals.runs import Runner
from evals.store import EvaluationStore
from gateway.mcp import Door
from gateway.mcp.environment_session import free_idle_slots
from gateway.modeldoor import ModelDoor
from gateway.pinned import close_stale
from gateway.replica_http import replica_client
from gateway.timers import LOOP_TIMERS, Timers
from gateway.wiring import Gateway
from hosting.assembly import build_hosting
from hosting.endpoints import EndpointManager
from hosting.limits import EndpointLimits
from hosting.models import Backend
from hosting.monitor import HealthMonitor
from hosting.reconcile import Keeper
from hosting.runtimes.base import AnyRuntime
from hosting.runtimes.confinement import Confinement
from hosting.runtimes.engine import engine_client
from hosting.runtimes.process import ProcessRuntime
from hosting.runtimes.spaces import SpaceRuntime
from hosting.scaling import LIVENESS_INTERVAL_S

__all__ = ["Services"]

_HTTP_LIMITS = httpx.Limits(max_connections=512, max_keepalive_connections=128)


@dataclass
class Services:
    settings: Settings
    engine: Engine
    leases: Leases
    hub: Hub
    syncer: Syncer
    guard: OutboundGuard  # every URL a user supplies is fetched through it
    session_secret: bytes  # signs sign-in state, seals users' Hub tokens
    sessions: SessionStore
    identities: Identities
    oauth: Provider
    endpoints: EndpointManager
    keeper: Keeper  # keeps the endpoints' rows true against what runs
    checker: Checker
    validations: Validations  # openenv's own validator on environments' folders and servers
    publisher: Publisher
    monitor: HealthMonitor
    play: PlaySessions
    evaluations: EvaluationStore  # the evaluation runs on record, and their episodes
    runner: Runner  # the evaluation runs under way in this process
    evaluator: Evaluator  # starts evaluation runs, from the API, the UI and the CLI
    statistics: Statistics  # statistical reports: reference players play an endpoint, as evaluations
    presets: ModelPresets  # the models people saved, keys sealed
    tasksets: Tasksets  # linked datasets, read from the Hub at pinned revisions
    endpoint_tokens: EndpointTokens  # each private endpoint's own bearer token
    gateway: Gateway  # the data plane: what it needs of all this, and nothing more
    agents: AgentSessions  # the agent sessions on record, played through the MCP door
    mcp: Door  # every endpoint's standard MCP door, and the sessions it holds in this process
    door: PooledDoor  # the door as the gateway hands it requests, each seated in its endpoint's pool
    agent_runs: AgentRuns  # harness runs on record, with the model calls they sent through the model door
    run_ends: RunEnds  # ends a run whole: on record, its door sessions, its reward
    model_door: ModelDoor  # agent runs' model calls, passed on to their presets' servers and recorded
    submissions: SubmissionQueue  # the board's queue of Spaces submitted at a revision
    http: httpx.AsyncClient | None = None  # envhub's own client (gateway, sign-in), while it serves
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        hub: Hub | None = None,
        runtimes: dict[Backend, AnyRuntime] | None = None,
        guard: OutboundGuard | None = None,
        timers: Timers = LOOP_TIMERS,
    ) -> "Services":
        engine = create_db_engine(settings.database_url)
        leases = Leases(engine, ttl_s=settings.lease_ttl_s)
        hub = hub or hub_from_settings(settings)
        secret = session_secret(settings)
        sessions = SessionStore(engine, secret, settings.session_max_age_s)
        access = Access(sign_in=settings.auth_mode != "off", anonymous_launch=settings.anonymous_may_launch())
        runtimes = runtimes_from_settings(settings, sessions.sealer, leases.instance) if runtimes is None else runtimes
        hosting = build_hosting(
            engine,
            runtimes,
            settings.data_dir / "endpoints",
            EndpointLimits(
                settings.max_endpoints,
                settings.max_endpoints_per_owner,
                settings.endpoint_idle_timeout_s,
                play_idle_s=settings.play_idle_s,
                servers=settings.max_servers,
                servers_per_owner=settings.max_servers_per_owner,
                pool_idle_s=settings.pool_idle_s,
                queue=settings.pool_queue_max,
                queue_per_client=settings.pool_queue_per_client,
                held_per_client=settings.sessions_per_client(),
            ),
            leases,
            access,
        )
        guard = guard or OutboundGuard(allow_private=settings.allow_private_urls)
        identities = Identities(settings, sessions)
        tokens = EndpointTokens(secret)
        endpoints, keeper = hosting.endpoints, hosting.keeper
        checker = Checker(
            engine,
            guard,
            timeout_s=settings.check_timeout_s,
            deadline_s=settings.check_deadline_s,
            quality_deadline_s=settings.quality_deadline_s,
            max_running=settings.max_concurrent_checks,
        )
        # Publishing always acts with the user's token, never the server's HF_TOKEN.
        spaces = SpaceRuntime(settings.hf_endpoint, None, sealer=sessions.sealer, poll_s=settings.space_poll_s)
        monitor = HealthMonitor(
            engine,
            hub,
            endpoints,
            leases,
            guard,
            concurrency=settings.health_concurrency,
            timeout_s=settings.health_timeout_s,
            hub_token=settings.hf_token.get_secret_value() if settings.hf_token else None,
        )
        agents = AgentSessions(
            engine,
            leases.instance,
            session_bytes=settings.recording_session_bytes,
            budget_bytes=settings.recording_budget_bytes,
        )
        tasksets = Tasksets(
            settings.hf_endpoint,
            settings.hf_token.get_secret_value() if settings.hf_token else None,
            settings.data_dir / "datasets",
            Downloads(
                per_request=settings.taskset_downloads_per_request,
                per_hour=settings.taskset_downloads_per_hour,
                per_client_hour=settings.taskset_downloads_per_client_hour,
                per_dataset_hour=settings.taskset_downloads_per_dataset_hour,
            ),
            max_json_depth=settings.taskset_max_json_depth,
        )
        evaluations = EvaluationStore(engine, leases.instance)
        door = Door(AgentRecorder(engine, endpoints, tasksets, agents), ping_s=settings.ws_ping_s)
        runner = Runner(evaluations, settings.evaluation_budget_bytes)
        presets = ModelPresets(engine, sessions.sealer)
        agent_runs = AgentRuns(engine, leases.instance)
        run_ends = RunEnds(agent_runs, door)
        process = runtimes.get(Backend.PROCESS)
        # Harness CLIs are kept from envhub as the process backend keeps its servers: its user, homes and view.
        confinement = (
            process.confinement
            if isinstance(process, ProcessRuntime)
            else Confinement(settings.data_dir / "runtime", settings.process_user, closed=[settings.data_dir])
        )
        harnesses = HarnessJobs(settings, confinement, agent_runs, run_ends)
        model_door = ModelDoor(
            DoorRuns(agent_runs, presets, run_ends, settings.model_door_recheck_s),
            guard,
            max_body_bytes=settings.model_door_max_body_bytes,
            max_answer_bytes=settings.model_door_max_answer_bytes,
        )
        gateway = Gateway(
            routes=hosting.pools,
            bearers=GatewayBearers(identities, tokens, access),
            traffic=hosting.traffic.counters,
            settings=gateway_settings(settings),
            timers=timers,
        )
        evaluator = Evaluator(
            settings, engine, endpoints, presets, guard, tasksets, evaluations, runner, tokens, harnesses
        )
        validations = Validations(
            engine,
            Validator(
                timeout_s=settings.validator_timeout_s,
                max_running=settings.validator_max_running,
                policy=settings.validator_policy,
                runtime_policy=settings.validator_runtime_policy,
                url_timeout_s=settings.check_timeout_s,
            ),
            guard,
            process.snapshots if isinstance(process, ProcessRuntime) else None,
            lambda: engine_provider(engine_client, settings.docker_base_image),
        )
        statistics = Statistics(settings, evaluator, checker, validations)
        return cls(
            settings=settings,
            engine=engine,
            leases=leases,
            hub=hub,
            syncer=Syncer(engine, hub, workers=settings.hub_workers, leases=leases),
            guard=guard,
            session_secret=secret,
            sessions=sessions,
            identities=identities,
            oauth=Provider(settings),
            endpoints=endpoints,
            keeper=keeper,
            checker=checker,
            validations=validations,
            publisher=Publisher(engine, spaces, checker, settings.hf_endpoint),
            monitor=monitor,
            play=PlaySessions(),
            evaluations=evaluations,
            runner=runner,
            evaluator=evaluator,
            statistics=statistics,
            presets=presets,
            tasksets=tasksets,
            endpoint_tokens=tokens,
            gateway=gateway,
            agents=agents,
            mcp=door,
            door=PooledDoor(door, gateway),
            agent_runs=agent_runs,
            run_ends=run_ends,
            model_door=model_door,
            submissions=SubmissionQueue(settings, endpoints, checker, validations, leases, statistics),
        )

    @contextmanager
    def db(self) -> Iterator[Session]:
        with Session(self.engine) as session:
            yield session

    def prepare_catalog(self) -> None:
        """Schema, leftovers of a crashed sync, and the template folders: all local, no network."""
        prepare_catalog(self.engine, self.leases, self.settings.template_roots())

    # -- serving

    async def start(self) -> None:
        """Before the first request: the catalog, this instance's leases, the rows reconciled, the loops."""
        settings = self.settings
        await asyncio.to_thread(self.prepare_catalog)
        await asyncio.to_thread(self.leases.start)
        await asyncio.to_thread(self.keeper.reconcile)
        self.keeper.start()
        await self._interrupt_orphaned_evaluations()
        process = self.endpoints.runtime(Backend.PROCESS)
        if settings.process_preload == Preload.START and isinstance(process, ProcessRuntime):
            # In the background: the first launch then finds the zygote ready, or waits for it.
            threading.Thread(target=process.warm, name="zygote-start", daemon=True).start()
        self.http = replica_client(httpx.Timeout(120, connect=5), _HTTP_LIMITS)
        self.gateway.http = self.http
        loops = [
            periodically("checking endpoints", watch_endpoints(self.keeper), WATCH_INTERVAL_S),
            periodically("probing replicas", probe_replicas(self.keeper), LIVENESS_INTERVAL_S),
            periodically("closing idle play sessions", self._reap_play, min(30, self.play.idle_timeout_s)),
            periodically(
                "closing idle MCP sessions",
                lambda: close_stale(self.gateway.routes, self.http, settings.mcp_session_idle_s),
                min(30, settings.mcp_session_idle_s),
            ),
            periodically(
                "closing idle agent sessions",
                lambda: self.mcp.reap(settings.mcp_session_idle_s),
                min(30, settings.mcp_session_idle_s),
            ),
            periodically(
                "freeing idle agent sessions' slots",
                lambda: free_idle_slots(list(self.mcp.sessions.values()), settings.mcp_slot_idle_s),
                min(30, settings.mcp_slot_idle_s / 2),  # a slot frees within 1.5 times the idle time
            ),
            periodically(
                "marking orphaned evaluations",
                self._interrupt_orphaned_evaluations,
                EVALUATIONS_INTERVAL_S,
                first_after_s=EVALUATIONS_INTERVAL_S,
            ),
        ]
        if settings.sync_interval_s > 0:
            poll_s = min(settings.lease_ttl_s / 3, settings.sync_interval_s)
            loops.append(
                periodically(
                    "the background sync", sync_if_due(self.syncer, settings.sync_interval_s), poll_s, jitter=0.1
                )
            )
        if settings.quality_interval_s > 0:
            quality = quality_round(self.checker, self.endpoints, settings.quality_per_round)
            loops.append(
                periodically(
                    "a quality round",
                    quality,
                    settings.quality_interval_s,
                    jitter=0.1,
                    first_after_s=min(settings.quality_interval_s, 30),
                )
            )
        if settings.validator_interval_s > 0:
            loops.append(
                periodically(
                    "a validator round",
                    validation_round(self.validations, settings.validator_per_round),
                    settings.validator_interval_s,
                    jitter=0.1,
                    first_after_s=min(settings.validator_interval_s, 10),
                )
            )
        if settings.health_interval_s > 0:
            interval = settings.health_interval_s
            # The first round soon after start-up, so a fresh server shows status within a minute.
            first = min(interval, 60) * random.uniform(0.1, 0.3)
            loops.append(
                periodically("a health round", health_round(self.monitor), interval, jitter=0.1, first_after_s=first)
            )
        self._tasks = [asyncio.create_task(loop) for loop in loops]
        await self.submissions.start()

    async def _reap_play(self) -> None:
        await self.play.reap()

    async def _interrupt_orphaned_evaluations(self) -> None:
        live = await asyncio.to_thread(self.leases.live_instances)
        await asyncio.to_thread(self.evaluations.interrupt_orphans, live, self.runner.under_way)
        await asyncio.to_thread(self.agents.end_orphans, live)
        await asyncio.to_thread(self.statistics.fail_orphans, live)

    async def stop(self) -> None:
        """After the last request: the loops, play sessions, follow-ups, local servers and leases, in that order."""
        self.syncer.stop()
        for task in self._tasks:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        await self.statistics.stop()
        await self.submissions.stop()
        await self.runner.stop()
        await self.mcp.aclose()
        await self.model_door.aclose()
        await self.play.close_all()
        await self.publisher.aclose()
        await self.monitor.aclose()
        if self.http is not None:
            await self.http.aclose()
        await asyncio.to_thread(self.keeper.shutdown)
        await asyncio.to_thread(self.leases.stop)
        self.engine.dispose()
