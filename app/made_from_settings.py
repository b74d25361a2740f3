"""What envhub's settings make, each part on its own: the Hub's client, the launch backends, the gateway's knobs."""

from pathlib import Path
from urllib.parse import urlsplit

from sqlalchemy import make_url

from app.settings import Preload, Settings
from catalog.hub import HubClient
from core.sealing import Sealer
from gateway.wiring import GatewaySettings
from hosting.models import Backend
from hosting.runtimes.base import AnyRuntime
from hosting.runtimes.containers import ContainerRuntime
from hosting.runtimes.isolation import Limits
from hosting.runtimes.process import ProcessRuntime
from hosting.runtimes.spaces import SpaceRuntime
from hosting.runtimes.swarm import SwarmRuntime

__all__ = ["gateway_settings", "hub_from_settings", "runtimes_from_settings"]


def hub_from_settings(settings: Settings) -> HubClient:
    return HubClient(
        settings.hf_endpoint,
        settings.hf_token.get_secret_value() if settings.hf_token else None,
        timeout_s=settings.hub_timeout_s,
        max_retries=settings.hub_max_retries,
        backoff_s=settings.hub_backoff_s,
    )


def runtimes_from_settings(
    settings: Settings, sealer: Sealer | None = None, instance: str = ""
) -> dict[Backend, AnyRuntime]:
    """The launch backends this server offers; sealer keeps users' Hub tokens in Space handles.

    instance names this envhub process among those sharing the database: its spare containers carry it.
    """
    database = make_url(settings.database_url)
    database_file = [Path(database.database)] if database.get_backend_name() == "sqlite" and database.database else []
    process = ProcessRuntime(
        settings.data_dir / "runtime",
        ready_timeout_s=settings.launch_timeout_s,
        preload=settings.process_preload != Preload.OFF,
        hub_endpoint=settings.hf_endpoint,
        hub_token=settings.hf_token.get_secret_value() if settings.hf_token else None,
        user=settings.process_user,
        closed=[settings.data_dir, *database_file],  # servers read none of envhub's data
        templates=settings.template_roots(),
        logs_dir=settings.data_dir / "endpoints",
        limits=Limits(settings.process_memory, settings.process_pids, settings.process_disk, settings.process_nice),
    )
    return {
        Backend.PROCESS: process,
        Backend.DOCKER: ContainerRuntime(
            base_image=settings.docker_base_image,
            memory=settings.docker_memory,
            cpus=settings.docker_cpus,
            pids=settings.docker_pids,
            ready_timeout_s=settings.launch_timeout_s,
            catalog=settings.catalog_id(),
            instance=instance,
            spares=settings.docker_spares,
            snapshots=process.snapshots,  # a Space's commit, downloaded once for whichever backend builds it
        ),
        Backend.SWARM: SwarmRuntime(
            settings.swarm_host,
            base_image=settings.docker_base_image,
            memory=settings.docker_memory,
            cpus=settings.docker_cpus,
            pids=settings.docker_pids,
            ready_timeout_s=settings.launch_timeout_s,
            catalog=settings.catalog_id(),
            snapshots=process.snapshots,
        ),
        Backend.SPACE: SpaceRuntime(
            settings.hf_endpoint,
            settings.hf_token.get_secret_value() if settings.hf_token else None,
            sealer=sealer,
            poll_s=settings.space_poll_s,
        ),
    }


def gateway_settings(settings: Settings) -> GatewaySettings:
    """The gateway's knobs, from envhub's settings."""
    origins = {urlsplit(o.strip()).netloc.lower() for o in settings.allowed_origins.split(",") if o.strip()}
    if settings.public_url:
        origins.add(urlsplit(settings.public_url).netloc.lower())
    if settings.space_host:
        origins |= {h.strip().lower() for h in settings.space_host.split(",") if h.strip()}
    return GatewaySettings(
        pool_queue_s=settings.pool_queue_s,
        ws_ping_s=settings.ws_ping_s,
        ws_idle_s=settings.ws_idle_s,
        header_timeout_s=settings.header_timeout_s,
        max_head_bytes=settings.max_head_bytes,
        body_timeout_s=settings.body_timeout_s,
        max_body_bytes=settings.gateway_max_body_bytes,
        allowed_hosts=frozenset(origins),
        behind_proxy=settings.space_id is not None,
        sandbox_pages=settings.auth_mode != "off",
    )
