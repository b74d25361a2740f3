"""openenv's own validator, run through its Python API: a folder's report, and a running server's, as `openenv
validate --json` prints them."""

import asyncio
import json
import threading
from contextlib import suppress
from enum import StrEnum
from importlib.metadata import version
from pathlib import Path
from typing import Any

from openenv.cli._validation import validate_running_environment
from openenv.validation import (
    Level,
    PolicyError,
    SignatureError,
    UnsupportedPackageError,
    ValidationProvider,
    load_policy,
    run_validation,
    write_report,
)

from catalog.cards import MANIFEST_LIMIT
from core.errors import EnvhubError, InvalidInputError, PayloadTooLargeError, TooManyRequestsError
from core.outbound import OutboundGuard

__all__ = ["OPENENV_VERSION", "ValidationLevel", "Validator", "ValidatorTimeoutError"]

OPENENV_VERSION = f"openenv {version('openenv')}"


class ValidationLevel(StrEnum):
    STATIC = "static"
    RUNTIME = "runtime"
    SEMANTIC = "semantic"


_LEVELS = {
    ValidationLevel.STATIC: Level.STATIC,
    ValidationLevel.RUNTIME: Level.RUNTIME,
    ValidationLevel.SEMANTIC: Level.SEMANTIC,
}


class ValidatorTimeoutError(EnvhubError):
    """openenv's validator ran past its time; its worker thread finishes on its own, nothing is filed."""

    status_code = 504
    code = "validation_timeout"


class Validator:
    """Runs openenv's validator in worker threads, a few at a time, each bounded by a timeout.

    A worker thread cannot be stopped: one past its timeout keeps its place until it ends, so a validator that
    hangs holds a place rather than letting more pile up.
    """

    def __init__(
        self, *, timeout_s: float, max_running: int, policy: str, runtime_policy: str, url_timeout_s: float = 5
    ) -> None:
        self.timeout_s = timeout_s
        self.max_running = max_running
        self.policy = policy
        self.runtime_policy = runtime_policy
        self.url_timeout_s = url_timeout_s
        self._running = 0
        self._lock = threading.Lock()

    async def validate_folder(
        self, path: Path, *, level: ValidationLevel, provider: ValidationProvider | None = None
    ) -> dict[str, Any]:
        """The folder's report, as `openenv validate PATH --level LEVEL --json` prints it (with --skip-build when
        there is no provider: the build-dependent checks are then the validator's named skips)."""
        _refuse_unreadable(path)
        policy = self.policy if level == ValidationLevel.STATIC else self.runtime_policy
        return await self._in_thread(lambda: _folder_report(path, _LEVELS[level], policy, provider))

    async def validate_url(self, url: str, guard: OutboundGuard) -> dict[str, Any]:
        """`openenv validate --url URL --json`'s report: the running-environment contract, a report of its own."""
        target = await guard.resolve(url)
        return await self._in_thread(lambda: _url_report(target.url, self.url_timeout_s))

    async def _in_thread(self, work: Any) -> dict[str, Any]:
        with self._lock:
            if self._running >= self.max_running:
                raise TooManyRequestsError(
                    f"{self._running} validations are running, the most this server runs at once; try again later",
                    code="validations_at_once",
                )
            self._running += 1
        done = asyncio.get_running_loop().create_future()

        def run() -> None:
            try:
                result: dict[str, Any] | BaseException = work()
            except BaseException as exc:  # handed to the waiting request, whatever it is
                result = exc
            finally:
                with self._lock:
                    self._running -= 1
            with suppress(RuntimeError):  # the loop that asked closed while it ran (a command that timed out)
                done.get_loop().call_soon_threadsafe(_settle, done, result)

        threading.Thread(target=run, name="openenv-validate", daemon=True).start()
        try:
            return await asyncio.wait_for(asyncio.shield(done), self.timeout_s)
        except TimeoutError as exc:
            raise ValidatorTimeoutError(
                f"openenv's validator ran longer than {self.timeout_s:g} s (ENVHUB_VALIDATOR_TIMEOUT_S); "
                "nothing was filed: ask for a lower level, or raise the setting"
            ) from exc


def _settle(done: "asyncio.Future[dict[str, Any]]", result: dict[str, Any] | BaseException) -> None:
    if done.cancelled():
        return
    if isinstance(result, BaseException):
        done.set_exception(result)
    else:
        done.set_result(result)


def _refuse_unreadable(path: Path) -> None:
    """A folder openenv would not recognise, or whose openenv.yaml is larger than the catalog reads: refused before
    the validator reads it whole."""
    manifest = path / "openenv.yaml"
    if not path.is_dir() or not manifest.is_file():
        raise InvalidInputError(
            f"{path.name} has no openenv.yaml, the file openenv's validator recognises an environment by: add one",
            code="validation_unsupported_package",
        )
    size = manifest.stat().st_size
    if size > MANIFEST_LIMIT:
        raise PayloadTooLargeError(
            f"{path.name}'s openenv.yaml has {size} bytes, more than the {MANIFEST_LIMIT} envhub reads: shorten it",
            code="validation_manifest_too_large",
        )


def _folder_report(path: Path, level: Level, policy: str, provider: ValidationProvider | None) -> dict[str, Any]:
    """What `openenv validate` does with a folder, serialised as its --json does."""
    try:
        report = run_validation(
            path, max_level=level, skip_build=provider is None, policy=load_policy(policy), provider=provider
        )
    except (SignatureError, UnsupportedPackageError) as exc:
        raise InvalidInputError(
            f"openenv's validator does not recognise {path.name}: {exc}", code="validation_unsupported_package"
        ) from exc
    except PolicyError as exc:
        raise InvalidInputError(
            f"openenv's validator refused policy {policy!r}: {exc}; set ENVHUB_VALIDATOR_POLICY to v1 (static) and "
            "ENVHUB_VALIDATOR_RUNTIME_POLICY to v2",
            code="validation_policy",
        ) from exc
    parsed: dict[str, Any] = json.loads(write_report(report))
    return parsed


def _url_report(url: str, timeout_s: float) -> dict[str, Any]:
    try:
        report: dict[str, Any] = validate_running_environment(url, timeout_s=timeout_s)
    except ValueError as exc:  # what `openenv validate --url` exits 1 for, before any report
        raise InvalidInputError(f"openenv's validator refused {url}: {exc}", code="validation_url") from exc
    return report
