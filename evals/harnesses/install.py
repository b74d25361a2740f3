"""Installing the harness CLIs from npm into envhub's cache folder, one folder per package and version, and
finding them there.

A folder is complete once its `.complete` marker is written; installs of the same package wait for each other on
a lock file beside it (several envhubs, or test workers, on one machine). npm runs with HOME and XDG_* in a scratch
folder, since the packages' postinstall scripts (which must run: they fetch nothing, they put the native binary in
place) write there, and with npm's usual cache, so a machine that has the packages cached installs offline.
"""

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from core.errors import BackendUnavailableError
from evals.harnesses.specs import HARNESSES, Harness, Installed

__all__ = ["default_cache_dir", "find", "harness_named", "install", "installed", "package_dir"]

_INSTALL_TIMEOUT_S = 900  # a 400 MB package from the registry on a slow line
_TAIL_CHARS = 2000


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "envhub" / "harnesses"


def harness_named(name: str) -> Harness:
    harness = HARNESSES.get(name)
    if harness is None:
        raise BackendUnavailableError(
            f"there is no harness {name!r}: envhub runs {', '.join(HARNESSES)}", code="harness_unknown"
        )
    return harness


def package_dir(cache_dir: Path, package: str, version: str) -> Path:
    """The install folder of one package at one version: `@scope/name` goes in `scope-name-VERSION`."""
    return cache_dir / f"{package.lstrip('@').replace('/', '-')}-{version}"


def _complete(folder: Path) -> bool:
    return (folder / ".complete").is_file()


def _packages(harness: Harness) -> list[tuple[str, str]]:
    return [(harness.package, harness.version), *harness.companions]


def installed(harness: Harness, cache_dir: Path) -> bool:
    return all(_complete(package_dir(cache_dir, package, version)) for package, version in _packages(harness))


def find(harness: Harness, cache_dir: Path) -> Installed:
    """The installed CLI; harness_missing (saying the command that installs it) when it is not, npm_missing when
    this machine has no Node.js to run it."""
    if shutil.which("node") is None:
        raise BackendUnavailableError(
            f"{harness.name} runs on Node.js, which this machine lacks: install Node.js 20 or later and npm "
            "(Debian: apt-get install nodejs npm)",
            code="npm_missing",
        )
    folder = package_dir(cache_dir, harness.package, harness.version)
    binary = folder / "node_modules" / ".bin" / harness.binary
    if not installed(harness, cache_dir) or not binary.exists():
        raise BackendUnavailableError(
            f"{harness.name} ({harness.package}@{harness.version}) is not installed in {cache_dir}: install it with "
            f"`python -m app harnesses install {harness.name}` (or {harness.install_line.replace('DIR', str(folder))})",
            code="harness_missing",
        )
    companions = {package: package_dir(cache_dir, package, version) for package, version in harness.companions}
    return Installed(binary, folder, companions)


def install(harness: Harness, cache_dir: Path) -> Installed:
    """Install the CLI and its companions unless they are already, and return it."""
    for package, version in _packages(harness):
        _install_package(cache_dir, package, version)
    return find(harness, cache_dir)


def _install_package(cache_dir: Path, package: str, version: str) -> None:
    folder = package_dir(cache_dir, package, version)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(folder):
            return
        npm = shutil.which("npm")
        if npm is None:
            raise BackendUnavailableError(
                f"installing {package} needs npm, which this machine lacks: install Node.js 20 or later and npm "
                "(Debian: apt-get install nodejs npm)",
                code="npm_missing",
            )
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        # npm's usual cache (HOME is a scratch folder below), so packages it holds install offline.
        npm_cache = os.environ.get("npm_config_cache") or str(Path.home() / ".npm")  # noqa: SIM112 (npm's spelling)
        argv: list[str] = [npm, "install", "--prefix", str(partial), "--cache", npm_cache, "--prefer-offline"]
        argv += ["--no-audit", "--no-fund", "--no-update-notifier", f"{package}@{version}"]
        with tempfile.TemporaryDirectory(prefix="envhub-npm-") as scratch:
            env = os.environ | {
                "HOME": scratch,
                "XDG_CONFIG_HOME": f"{scratch}/.config",
                "XDG_CACHE_HOME": f"{scratch}/.cache",
                "XDG_DATA_HOME": f"{scratch}/.local/share",
                "XDG_STATE_HOME": f"{scratch}/.local/state",
            }
            try:
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                done = None
        if done is None or done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            said = "it took too long" if done is None else (done.stderr or done.stdout)[-_TAIL_CHARS:].strip()
            raise BackendUnavailableError(
                f"npm could not install {package}@{version}: {said}; check that the npm registry (or its cache, "
                f"{npm_cache}) is reachable and try again",
                code="harness_install_failed",
            )
        (partial / ".complete").touch()
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
