"""python -m app deploy: create or update a Docker Space that runs this envhub."""

import argparse
import os
import sys

from app.settings import Settings


def deploy(settings: Settings, args: argparse.Namespace) -> int:
    from huggingface_hub import HfApi, get_token

    from app.usecases.deploy import DeployError, Deployment, deploy_space, parse_assignment

    token = args.token or (settings.hf_token.get_secret_value() if settings.hf_token else None) or get_token()
    try:
        if not token:
            raise DeployError(
                f"no Hugging Face token: set HF_TOKEN or pass --token (a write token from "
                f"{settings.hf_endpoint.rstrip('/')}/settings/tokens)"
            )
        secrets = dict(parse_assignment(s, os.environ) for s in args.secret)
        if args.database_url:
            secrets["ENVHUB_DATABASE_URL"] = args.database_url
        deployment = Deployment(
            space_id=args.space,
            private=args.private,
            title=args.title,
            variables=dict(parse_assignment(v, os.environ) for v in args.variable),
            secrets=secrets,
        )
        deployed = deploy_space(HfApi(endpoint=settings.hf_endpoint, token=token), deployment)
    except DeployError as exc:
        print(f"envhub: {exc}", file=sys.stderr)
        return 1
    if "ENVHUB_ADMIN_TOKEN" not in deployment.secrets:
        print("note: no ENVHUB_ADMIN_TOKEN secret, so admin actions (e.g. POST /api/sync) are refused on the Space")
    host = deployed.app_url.removeprefix("https://")
    print(f"\ndeployed {deployed.space_id}\n  Space: {deployed.space_url}\n  App:   {deployed.app_url}  (host {host})")
    return 0


def add(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    command = commands.add_parser("deploy", help="create or update a Docker Space running this envhub")
    command.add_argument("--space", required=True, metavar="OWNER/NAME", help="the Space, e.g. alice/envhub")
    command.add_argument("--private", action="store_true", help="create the Space private (a new Space only)")
    command.add_argument("--title", help="the Space's title (default: its name)")
    command.add_argument("--token", help="a Hugging Face write token (default: HF_TOKEN, else your saved login)")
    command.add_argument(
        "--variable", action="append", default=[], metavar="KEY=VALUE", help="a Space variable (repeatable)"
    )
    command.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help="a Space secret, e.g. ENVHUB_ADMIN_TOKEN; KEY alone takes the value from your environment (repeatable)",
    )
    command.add_argument("--database-url", help="the catalog database, stored as the secret ENVHUB_DATABASE_URL")
    command.set_defaults(handler=deploy)
