"""python -m app sync: index the Hub's environment Spaces and datasets now, with a progress bar."""

import argparse
import sys

from tqdm import tqdm

from app.settings import Settings
from catalog.models import SyncStatus
from core.errors import ConflictError


def sync(settings: Settings, args: argparse.Namespace) -> int:
    from app.services import Services

    services = Services.build(settings)
    services.prepare_catalog()
    print(f"envhub: syncing from {settings.hf_endpoint}", file=sys.stderr)
    leases = services.leases
    leases.start()  # running instances see this sync and wait for it
    try:
        with tqdm(total=0, unit="space", desc="downloading cards", disable=args.quiet, file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            run = services.syncer.run(full=args.full, progress=progress)
    except ConflictError as exc:
        print(f"envhub: {exc.message}", file=sys.stderr)
        return 1
    finally:
        leases.stop()
    print(run.summary())
    return 0 if run.status == SyncStatus.OK else 1


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("sync", help="index environment Spaces and datasets from the Hub")
    command.add_argument("--full", action="store_true", help="download every card again, changed or not")
    command.add_argument("--quiet", action="store_true", help="no progress bar")
    command.set_defaults(handler=sync)
