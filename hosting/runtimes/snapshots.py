"""Hub Spaces downloaded at pinned commits, for the process backend: one folder per commit, made once.

A commit's folder appears under its name only when complete (it is downloaded beside it and renamed
into place), so finding it is the mark of a finished download: a later launch of that commit reads
it without asking the Hub anything, even one started without the token that downloaded it. Before
a download, a check reads the Space's file listing and the few small files that say how it runs.
Downloads go with the launching user's Hub token, or envhub's own (HF_TOKEN) for a launch by nobody
in particular; a token is never written into the folder, a log or a message.

A Space keeps its last few commits used (KEPT_COMMITS) and every commit a server runs from; a new
download removes the others.
"""

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, RepoFile, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from core.errors import EnvhubError, HubUnavailableError, InvalidInputError, LaunchError, PayloadTooLargeError
from hosting.runtimes.base import Report
from hosting.runtimes.layouts import SMALL_FILE, FolderFiles, ListedFiles, RepoFiles

__all__ = ["KEPT_COMMITS", "Snapshots"]

KEPT_COMMITS = 3  # downloaded commits of a Space kept beyond those a server runs from


class Snapshots:
    """The commits of Spaces downloaded under one folder, as `<owner>/<name>/<sha>`."""

    def __init__(self, root: Path, endpoint: str | None, token: str | None) -> None:
        """endpoint: the Hub's (None: huggingface_hub's own, from HF_ENDPOINT); token: envhub's, for launches
        by nobody in particular."""
        self.root = root.resolve()
        self.endpoint = endpoint
        self.token = token
        self._lock = threading.Lock()
        self._fetching: dict[str, threading.Lock] = {}
        self._held: dict[str, Path] = {}  # server id: the commit folder it runs from

    def hold(self, server_id: str, folder: Path) -> None:
        """Keep the folder while the server runs from it."""
        with self._lock:
            self._held[server_id] = folder

    def release(self, server_id: str) -> None:
        with self._lock:
            self._held.pop(server_id, None)

    def find(self, space_id: str, sha: str) -> Path | None:
        """The commit's folder when it was downloaded whole."""
        folder = self.root / space_id / sha
        return folder if folder.is_dir() else None

    def files(self, space_id: str, sha: str, token: str | None) -> RepoFiles:
        """The Space's files at the commit: its folder's when downloaded, else the Hub's listing of them."""
        found = self.find(space_id, sha)
        if found is not None:
            return FolderFiles(found)
        api = self._api(token)
        with self._translated(space_id, sha, token, starting=False):
            sizes = self._sizes(api, space_id, sha)

        def read(path: str) -> str | None:
            if sizes[path] > SMALL_FILE:
                return None
            with self._translated(space_id, sha, token, starting=False):
                local = api.hf_hub_download(
                    space_id, path, repo_type="space", revision=sha, cache_dir=self.root / ".files"
                )
            return Path(local).read_text(errors="replace")

        return ListedFiles(sizes, read)

    def fetch(
        self, space_id: str, sha: str, token: str | None, report: Report, *, max_bytes: int | None = None
    ) -> Path:
        """The commit's folder, downloaded unless it was before (one download however many launches wait).

        max_bytes: a commit whose files add up to more is refused from its listing, before any download."""
        with self._lock:
            fetching = self._fetching.setdefault(f"{space_id}@{sha}", threading.Lock())
        with fetching:
            found = self.find(space_id, sha)
            if found is not None:
                found.touch()  # used now: among the last few kept
                found.chmod(0o755)  # downloaded by an envhub that made it its own alone
                return found
            folder = self.root / space_id / sha
            folder.parent.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=f".{sha}-", dir=folder.parent))
            try:
                with self._translated(space_id, sha, token, starting=True):
                    api = self._api(token)
                    sizes = self._sizes(api, space_id, sha)
                    megabytes = sum(sizes.values()) / 1e6
                    if max_bytes is not None and sum(sizes.values()) > max_bytes:
                        raise PayloadTooLargeError(
                            f"{space_id}@{sha[:12]} holds {megabytes:.1f} MB in {len(sizes)} files, more than the "
                            f"{max_bytes / 1e6:.1f} MB allowed here: keep large files (weights, data sets) in a model "
                            "or dataset repo and download them at start",
                            code="space_too_large",
                        )
                    report(f"downloading {space_id}@{sha[:12]}: {len(sizes)} files, {megabytes:.1f} MB")
                    snapshot_download(
                        space_id,
                        repo_type="space",
                        revision=sha,
                        local_dir=partial,
                        endpoint=api.endpoint,
                        token=api.token,
                        library_name="envhub",
                    )
                shutil.rmtree(partial / ".cache", ignore_errors=True)  # huggingface_hub's download bookkeeping
                partial.chmod(0o755)  # made envhub's alone; servers run as a user of their own read it
                try:
                    partial.rename(folder)
                except OSError:
                    if not folder.is_dir():
                        raise
                    # another envhub on this data folder downloaded it first
            finally:
                shutil.rmtree(partial, ignore_errors=True)
        self._prune(folder.parent)
        return folder

    def _prune(self, space_folder: Path) -> None:
        """Remove the Space's commits beyond the last few used, but for those servers run from."""
        with self._lock:
            held = set(self._held.values())
        commits = sorted(
            (entry for entry in space_folder.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
            key=lambda entry: entry.stat().st_mtime,
            reverse=True,
        )
        for old in commits[KEPT_COMMITS:]:
            if old not in held:
                shutil.rmtree(old, ignore_errors=True)

    def _api(self, token: str | None) -> HfApi:
        # False, not None: huggingface_hub would otherwise find a token of its own (HF_TOKEN, a login's).
        return HfApi(endpoint=self.endpoint, token=token or self.token or False, library_name="envhub")

    @staticmethod
    def _sizes(api: HfApi, space_id: str, sha: str) -> dict[str, int]:
        """The Space's files at the commit, with their sizes."""
        tree = api.list_repo_tree(space_id, repo_type="space", revision=sha, recursive=True)
        return {entry.path: entry.size for entry in tree if isinstance(entry, RepoFile)}

    @contextmanager
    def _translated(self, space_id: str, sha: str, token: str | None, *, starting: bool) -> Iterator[None]:
        """The Hub's errors as envhub's, saying what to do: LaunchError while starting, else a refusal
        (InvalidInputError) or HubUnavailableError."""
        at = f"{space_id}@{sha[:12]}"
        error: type[EnvhubError] = LaunchError if starting else InvalidInputError
        unavailable: type[EnvhubError] = LaunchError if starting else HubUnavailableError
        try:
            yield
        except RevisionNotFoundError as exc:
            raise error(
                f"{space_id} has no commit {sha[:12]} on the Hub any more: sync the catalog and launch it again"
            ) from exc
        except RepositoryNotFoundError as exc:
            if token:
                advice = "your Hub token cannot read it: it is gone, or private to someone else"
            elif self.token:
                advice = "envhub's HF_TOKEN cannot read it: sign in with Hugging Face to launch it as you"
            else:
                advice = (
                    "it is private or gone: sign in with Hugging Face (or send 'Authorization: Bearer "
                    "<your Hub token>') so that envhub downloads it as you"
                )
            who = None if token else "hub_token_required"  # signed in, it is the user's token that cannot read it
            raise error(f"the Hub shows no Space {at}: {advice}", code=who) from exc
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "no answer"
            raise unavailable(f"the Hub answered {status} for {at}: try again later") from exc
        except (httpx2.HTTPError, OSError) as exc:
            raise unavailable(
                f"could not read {at} from the Hub ({type(exc).__name__}: {exc}); try again later"
            ) from exc
