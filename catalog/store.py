"""The catalog's reads and writes of environment rows that other packages share."""

from typing import Any

from catalog.models import EnvironmentDetail
from protocol.interface import Interface, Split
from protocol.tools import parse_tools

__all__ = ["cached_interface", "interface_columns"]


def interface_columns(interface: Interface) -> dict[str, Any]:
    """The environment row's columns that cache what its server says about itself."""
    splits = [{"name": s.name, "type": s.type, "num_tasks": s.count} for s in interface.splits]
    return {
        "env_metadata": interface.metadata,
        "env_schema": interface.schema,
        "tools": None if interface.tools is None else [tool.listed() for tool in interface.tools],
        "tasks": {"env_name": interface.task_env, "splits": splits} if interface.task_env and splits else None,
    }


def cached_interface(environment: EnvironmentDetail) -> Interface:
    """What the catalog last cached of an environment's interface (the health monitor keeps it)."""
    tasks = environment.tasks or {}
    splits = []
    for item in tasks.get("splits") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            count = item.get("num_tasks", item.get("count"))
            splits.append(Split(item["name"], str(item.get("type") or ""), count if isinstance(count, int) else None))
    task_env = tasks.get("env_name")
    return Interface(
        metadata=environment.env_metadata,
        schema=environment.env_schema,
        tools=None if environment.tools is None else tuple(parse_tools(environment.tools)),
        task_env=task_env if isinstance(task_env, str) else None,
        splits=tuple(splits),
    )
