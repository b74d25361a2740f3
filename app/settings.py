"""envhub's configuration: one settings object read from the environment."""

import hashlib
from enum import StrEnum
from pathlib import Path
from typing import Literal, Self

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import make_url

from evals.harnesses.install import default_cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent


class Preload(StrEnum):
    """When the process backend's zygote starts (hosting/runtimes/zygote.py)."""

    START = "start"
    LAUNCH = "launch"
    OFF = "off"


class Settings(BaseSettings):
    """Every knob envhub reads; ENVHUB_* variables, plus the Hub's own HF_* names."""

    model_config = SettingsConfigDict(env_prefix="ENVHUB_", populate_by_name=True, extra="ignore")

    database_url: str = "sqlite:///./data/envhub.db"
    admin_token: SecretStr | None = None
    sync_interval_s: float = Field(default=3600, ge=0, description="0 turns the background sync off")
    lease_ttl_s: float = Field(
        default=30,
        gt=0,
        description="instances sharing a database: how long an instance's leases (background sync, health rounds, "
        "its endpoints) outlive it before another takes over",
    )
    extra_templates: str = Field(
        default="", description=":-separated folders whose subfolders are OpenEnv environments"
    )
    templates_dir: Path = REPO_ROOT / "spaces_templates"
    data_dir: Path = Field(default=Path("./data"), description="endpoint logs and cached virtualenvs")
    public_url: str | None = Field(default=None, description="base URL users reach envhub at, if not the request's")
    ui: bool = Field(
        default=True, description="serve the web page at /; false: the API and the gateway only (a headless instance)"
    )

    max_endpoints: int = Field(default=20, ge=0)
    max_endpoints_per_owner: int = Field(default=5, ge=0)
    endpoint_idle_timeout_s: float = Field(default=1800, gt=0, description="stop endpoints without sessions this long")
    play_idle_s: float = Field(
        default=300, gt=0, description="stop endpoints launched from the Play tab without sessions this long"
    )
    max_servers: int = Field(default=64, ge=0, description="replicas of all endpoints together")
    max_servers_per_owner: int = Field(default=32, ge=0, description="replicas of one owner's endpoints together")
    docker_base_image: str = Field(default="python:3.11-slim", description="BASE_IMAGE for template builds")
    docker_memory: str = "2g"
    docker_cpus: float = Field(default=1.0, gt=0)
    docker_pids: int = Field(default=512, gt=0)
    docker_spares: int = Field(
        default=2,
        ge=0,
        description="images (the last launched) that keep one container started ahead, which the next launch "
        "of the image without variables of its own claims up and running; 0 turns spares off",
    )
    swarm_host: str | None = Field(
        default=None, description="the swarm manager for the swarm backend (any DOCKER_HOST form); default: DOCKER_HOST"
    )
    pool_queue_s: float = Field(
        default=60, ge=0, description="how long a new session waits for a free slot in a full pool before it is refused"
    )
    pool_idle_s: float = Field(
        default=300, gt=0, description="a pool shrinks (down to its min) by replicas without sessions this long"
    )
    ws_ping_s: float = Field(
        default=20,
        gt=0,
        description="the gateway pings clients' and servers' WebSockets this often; one that leaves a ping "
        "unanswered for an interval is closed",
    )
    pool_queue_max: int = Field(
        default=512, ge=0, description="new sessions that may wait for a slot in one pool at once; more are refused"
    )
    pool_queue_per_client: int = Field(
        default=128,
        ge=0,
        description="of those, how many one client (a signed-in user, else an address) may have waiting at once",
    )
    pool_sessions_per_client: int | None = Field(
        default=None,
        ge=0,
        description="sessions one client (an address; a signed-in user on a private endpoint) may hold on one "
        "public endpoint at once, /ws and MCP alike; more are refused at once. Default: 64 with sign-in on, no cap "
        "without (envhub is then its user's own machine); 0: no cap",
    )
    mcp_session_idle_s: float = Field(
        default=900,
        gt=0,
        description="an MCP session made over HTTP that nobody calls (and no socket is attached to) this long is "
        "closed on its server, so that its slot frees",
    )
    recording_session_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="bytes of episodes one agent session's recording keeps; past them, its oldest episodes go first",
    )
    recording_budget_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="bytes of episodes the agent sessions of one client (a signed-in user, else an address) keep "
        "together; past them, the oldest episodes go first",
    )
    mcp_slot_idle_s: float = Field(
        default=60,
        gt=0,
        description="an MCP session (the standard door's) nobody calls this long gives its environment slot back; "
        "its id stays valid, and its next call takes a slot again (its episode lost: the answer says episode_lost)",
    )
    agent_run_max_calls: int = Field(
        default=200, gt=0, description="model calls an agent run may make, unless it asks for fewer"
    )
    agent_run_max_output_tokens: int = Field(
        default=200_000, gt=0, description="output tokens an agent run's model may write, unless it asks for fewer"
    )
    agent_run_wall_s: float = Field(
        default=1800, gt=0, description="how long an agent run may take its model's calls, unless it asks for less"
    )
    agent_run_ttl_s: float = Field(
        default=86_400, gt=0, description="an agent run's credential lapses this long after the run starts"
    )
    model_door_max_body_bytes: int = Field(
        default=32 * 1024 * 1024, gt=0, description="the largest request body the model door passes on to a model"
    )
    model_door_max_answer_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0, description="the largest model answer the model door reads whole or records"
    )
    model_door_recheck_s: float = Field(
        default=2.0,
        gt=0,
        description="how often the model door reads a running agent run's row again, to see an end by another "
        "envhub process (an end through this one is seen at once)",
    )
    ws_idle_s: float = Field(
        default=300,
        gt=0,
        description="a /ws session whose client and server have sent no message this long is closed (4000) when "
        "another session waits for a slot in its pool, so that the slot goes to the waiting one",
    )
    gateway_max_body_bytes: int = Field(
        default=32 * 1024 * 1024, gt=0, description="the largest request body the gateway passes on to a server"
    )
    header_timeout_s: float = Field(
        default=10, gt=0, description="how long a connection has to send a whole request head (a WebSocket's too)"
    )
    max_head_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="the largest request head (its line and headers, a WebSocket handshake's too) envhub reads",
    )
    body_timeout_s: float = Field(
        default=30, gt=0, description="how long a request's body may take to arrive whole once its head has"
    )
    allowed_origins: str = Field(
        default="",
        description="comma-separated origins (https://host[:port]) whose web pages may open sessions on endpoints, "
        "besides envhub's own; clients that send no Origin (trainers, scripts) are not affected",
    )
    space_poll_s: float = Field(default=5, gt=0, description="how often a Space's build is checked")
    harness_dir: Path = Field(
        default_factory=default_cache_dir,
        description="where the harness CLIs (Claude Code, Codex, opencode, Qwen Code) are installed from npm, a "
        "folder per package and version",
    )
    harness_wall_s: float = Field(
        default=900, gt=0, description="how long one headless harness run may take before its processes are killed"
    )
    launch_timeout_s: float = Field(default=60, gt=0, description="how long a server may take to answer /health")
    process_preload: Preload = Field(
        default=Preload.START,
        description="fork process-backend servers from a zygote that has imported openenv once: "
        "started with envhub (start), at the first launch (launch), or never (off)",
    )
    process_user: str = Field(
        default="envhub-env",
        description="the unprivileged user process servers run as when envhub runs as root (a system user, made "
        "when missing); empty: envhub's own user",
    )
    process_memory: int = Field(
        default=4096 * 1024 * 1024,
        gt=0,
        description="bytes of heap and private memory each process of a process server may hold (RLIMIT_DATA); "
        "past it, allocations fail (Python's MemoryError)",
    )
    process_pids: int = Field(
        default=4096,
        gt=0,
        description="processes and threads a process server may start (RLIMIT_NPROC, which the kernel counts per "
        "user: as root, all servers' together); past it, fork and new threads fail (EAGAIN)",
    )
    process_disk: int = Field(
        default=1024 * 1024 * 1024,
        gt=0,
        description="bytes of the largest file a process server may write (RLIMIT_FSIZE; past it, writes fail with "
        "EFBIG), and of its /tmp in a view",
    )
    process_nice: int = Field(
        default=10, ge=0, le=19, description="the niceness process servers run at: envhub comes first on busy CPUs"
    )

    allow_private_urls: bool = Field(
        default=False,
        description="let user-supplied URLs (check, register, play) reach loopback and private addresses: local use",
    )
    check_timeout_s: float = Field(default=10, gt=0, description="per request or frame of a conformance check")
    check_deadline_s: float = Field(default=30, gt=0, description="a whole conformance check")
    quality_deadline_s: float = Field(default=60, gt=0, description="a whole quality report")
    quality_interval_s: float = Field(
        default=120,
        ge=0,
        description="seconds between background quality rounds, which report on running endpoints and then "
        "running Spaces whose revision has no report yet; 0 turns them off",
    )
    quality_per_round: int = Field(default=1, ge=1, description="quality reports a background round runs at most")
    max_concurrent_checks: int = Field(default=4, ge=1, description="conformance checks running at once")
    validator_policy: Literal["v1", "v2"] = Field(
        default="v1", description="openenv's severity policy pinned for the validator's static level"
    )
    validator_runtime_policy: Literal["v2"] = Field(
        default="v2", description="openenv's severity policy pinned for its runtime and semantic levels"
    )
    validator_timeout_s: float = Field(default=300, gt=0, description="one run of openenv's validator")
    validator_max_running: int = Field(default=2, ge=1, description="runs of openenv's validator at once")
    validator_interval_s: float = Field(
        default=300,
        ge=0,
        description="seconds between background rounds of openenv's validator (static level) on revisions with no "
        "report; 0 turns them off",
    )
    validator_per_round: int = Field(default=4, ge=1, description="revisions a background validator round runs")
    board_concurrency: int = Field(default=1, ge=1, description="board submissions checked at once")
    board_per_user: int = Field(default=3, ge=1, description="board submissions one user may have queued or running")
    board_max_space_bytes: int = Field(
        default=500 * 1024 * 1024, gt=0, description="the largest Space a board submission downloads (its files' sum)"
    )
    board_download_timeout_s: float = Field(default=300, gt=0, description="a board submission's download stage")
    board_launch_timeout_s: float = Field(
        default=180, gt=0, description="a board submission's launch stage: its endpoint started and ready"
    )
    board_checks_timeout_s: float = Field(
        default=180, gt=0, description="a board submission's hub lane: the conformance checklist and quality report"
    )
    board_statistical_timeout_s: float = Field(
        default=900, gt=0, description="a board submission's statistical lane: the reference players and its checks"
    )
    health_interval_s: float = Field(default=300, ge=0, description="seconds between health rounds; 0 turns them off")
    health_concurrency: int = Field(default=16, ge=1, description="probes running at once in a health round")
    blocking_threads: int = Field(
        default=64, ge=4, description="threads for blocking work at once: database reads, Docker, launches, builds"
    )
    health_timeout_s: float = Field(default=5, gt=0, description="per request of a health probe")
    taskset_downloads_per_request: int = Field(
        default=20,
        ge=1,
        description="dataset files one request (a page of tasksets, an evaluation's rows) may download; "
        "files already on disk do not count",
    )
    taskset_downloads_per_hour: int = Field(
        default=200, ge=1, description="dataset files envhub downloads in an hour, all requests together"
    )
    taskset_downloads_per_client_hour: int = Field(
        default=50,
        ge=1,
        description="of those, how many one client's requests (a signed-in user, else an address) may download",
    )
    taskset_downloads_per_dataset_hour: int = Field(
        default=100, ge=1, description="of those, how many may be one dataset's files"
    )
    taskset_max_json_depth: int = Field(
        default=64,
        ge=1,
        le=200,  # deeper, an answer holding the row could not be written as JSON
        description="how deep a dataset row's arrays and objects (or its openenv_reset JSON text) may nest; a "
        "split with a deeper row is that split's problem",
    )
    max_evaluations_per_owner: int = Field(
        default=2,
        ge=1,
        description="evaluations one user (or everyone not signed in, together) may have queued or running at once; "
        "the admin is not capped",
    )
    max_evaluation_episodes: int = Field(default=500, ge=1, description="episodes of one evaluation, but the admin's")
    max_evaluation_concurrency: int = Field(
        default=16, ge=1, description="episodes one evaluation plays at once, but the admin's"
    )
    max_evaluation_steps: int = Field(default=1000, ge=1, description="steps of one episode, but the admin's")
    evaluation_budget_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=0,
        description="bytes one evaluation stores of its episodes' steps with their observations whole; past them, "
        "each observation is stored as its digest and start",
    )
    statistical_episodes: int = Field(
        default=8, ge=1, le=500, description="tasks (or seeds) each reference player of a statistical report plays"
    )
    statistical_k: int = Field(default=4, ge=1, le=64, description="samples a model plays of each task, for pass@k")
    statistical_group_size: int = Field(default=8, ge=2, le=1024, description="G, the GRPO group P(signal) is for")
    statistical_temperature: float = Field(default=1.0, ge=0, le=2, description="a model player's sampling temperature")
    statistical_reference_preset: str = Field(
        default="", description="the admin's model preset a statistical report plays when its caller picks none"
    )
    statistical_replays: int = Field(default=2, ge=1, le=20, description="episodes the variance check plays again")
    statistical_max_steps: int = Field(default=100, ge=1, le=10_000, description="steps of a reference episode")
    statistical_concurrency: int = Field(
        default=4, ge=1, le=64, description="episodes a reference player plays at once"
    )

    hf_endpoint: str = Field(
        default="https://huggingface.co",
        validation_alias=AliasChoices("hf_endpoint", "HF_ENDPOINT"),
    )
    hf_token: SecretStr | None = Field(default=None, validation_alias=AliasChoices("hf_token", "HF_TOKEN"))
    hub_timeout_s: float = Field(default=20, gt=0, description="per-request timeout")
    hub_max_retries: int = Field(default=4, ge=0)
    hub_backoff_s: float = Field(default=1, ge=0, description="first retry wait, doubling")
    hub_workers: int = Field(default=8, ge=1, description="parallel file downloads in a sync")

    # Sign in with Hugging Face. A Space with `hf_oauth: true` injects the four OAUTH_*/OPENID_* variables.
    oauth_client_id: str | None = Field(
        default=None, validation_alias=AliasChoices("oauth_client_id", "OAUTH_CLIENT_ID", "ENVHUB_OAUTH_CLIENT_ID")
    )
    oauth_client_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("oauth_client_secret", "OAUTH_CLIENT_SECRET", "ENVHUB_OAUTH_CLIENT_SECRET"),
    )
    oauth_scopes: str = Field(
        default="openid profile manage-repos write-repos",
        validation_alias=AliasChoices("oauth_scopes", "OAUTH_SCOPES", "ENVHUB_OAUTH_SCOPES"),
        description="space-separated; launching and publishing Spaces as the user needs manage-repos and write-repos",
    )
    openid_provider_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("openid_provider_url", "OPENID_PROVIDER_URL", "ENVHUB_OPENID_PROVIDER_URL"),
        description="the OpenID provider; HF_ENDPOINT when unset",
    )
    dev_login: bool = Field(
        default=False,
        description="local development only: 'Sign in' signs in as the owner of HF_TOKEN, checked against HF_ENDPOINT",
    )
    session_secret: SecretStr | None = Field(
        default=None,
        description="signs login state and seals users' Hub tokens at rest; derived from the OAuth client secret, "
        "else random per process (sessions then end with the process)",
    )
    session_max_age_s: int = Field(default=8 * 3600, gt=0, description="how long a sign-in lasts")
    anonymous_launch: bool | None = Field(
        default=None, description="let people who are not signed in launch endpoints; default: only when sign-in is off"
    )
    space_id: str | None = Field(default=None, validation_alias=AliasChoices("space_id", "SPACE_ID"))
    space_host: str | None = Field(default=None, validation_alias=AliasChoices("space_host", "SPACE_HOST"))

    @model_validator(mode="after")
    def _no_dev_login_on_a_space(self) -> Self:
        if self.dev_login and self.space_id:
            raise PydanticCustomError(
                "dev_login_on_space",
                "ENVHUB_DEV_LOGIN is for local development; a Space signs in with OAuth (hf_oauth: true)",
            )
        return self

    @property
    def auth_mode(self) -> Literal["oauth", "dev", "off"]:
        """How people sign in: OAuth against the provider, as HF_TOKEN's owner (local dev), or not at all."""
        if self.oauth_client_id and self.oauth_client_secret:
            return "oauth"
        return "dev" if self.dev_login else "off"

    def sessions_per_client(self) -> int:
        """The cap on one client's sessions on one public endpoint; 0: none."""
        if self.pool_sessions_per_client is not None:
            return self.pool_sessions_per_client
        return 0 if self.auth_mode == "off" else 64

    def anonymous_may_launch(self) -> bool:
        return self.auth_mode == "off" if self.anonymous_launch is None else self.anonymous_launch

    def catalog_id(self) -> str:
        """A short name for this catalog's database, the same on every instance that shares it."""
        url = make_url(self.database_url)
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            url = url.set(database=str(Path(url.database).resolve()))
        rendered = url.render_as_string(hide_password=True)
        return hashlib.sha256(rendered.encode()).hexdigest()[:12]

    def template_roots(self) -> list[Path]:
        """The built-in templates folder first, then each extra folder."""
        extra = [Path(p) for p in self.extra_templates.split(":") if p.strip()]
        return [self.templates_dir, *extra]
