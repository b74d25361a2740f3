"""Checklist items 34-36: the Task API of openenv 0.10 (skipped on older servers)."""

from typing import Any
from urllib.parse import quote

from conformance.context import Context, Fail, NotRun, Skip, excerpt, is_int
from conformance.engine import NEWER, Registry

checks: Registry[Context] = Registry()

_SPLIT_TYPES = {"train", "validation", "test"}
_MAX_LISTED_TASKS = 1000  # past this, POST /tasks is not fetched: it returns every task at once


def _env_path(ctx: Context) -> str:
    if not ctx.facts.task_api or ctx.facts.env_name is None:
        raise Skip("no Task API: an older server (before openenv 0.10)")
    return "/" + quote(ctx.facts.env_name, safe="")


@checks("34", "GET /list_environments names the environment", since=NEWER)
async def list_environments(ctx: Context) -> str:
    fetched = await ctx.get("/list_environments")
    if fetched.status == 404:
        raise Skip("no /list_environments: an older server without the Task API")
    body = ctx.expect(fetched, 200, "GET /list_environments")
    ctx.facts.task_api = True
    if not isinstance(body, list) or len(body) != 1 or not isinstance(body[0], str):
        raise Fail(f"GET /list_environments answered {excerpt(body, 120)}, not a list of one name")
    ctx.facts.env_name = body[0]
    return body[0]


@checks("35", "GET /{env}/splits lists train/validation/test splits; an unknown env is 404", since=NEWER)
async def splits(ctx: Context) -> str:
    path = _env_path(ctx)
    fetched = await ctx.get(f"{path}/splits")
    if fetched.status == 501:
        ctx.facts.splits = []
        message = "splits are not supported (501)"
    else:
        body = ctx.expect(fetched, 200, f"GET {path}/splits")
        if not isinstance(body, list):
            raise Fail(f"GET {path}/splits answered {excerpt(body, 120)}, not a list")
        for split in body:
            if not isinstance(split, dict) or not isinstance(split.get("name"), str):
                raise Fail(f"a split without a name: {excerpt(split, 120)}")
            if split.get("type") not in _SPLIT_TYPES:
                raise Fail(
                    f"split {split['name']} has type {excerpt(split.get('type'), 40)}, not train/validation/test"
                )
        ctx.facts.splits = body
        message = f"splits {', '.join(s['name'] for s in body) or '(none)'}"
    unknown = ctx.expect(await ctx.get("/__nope__/splits"), 404, "GET /__nope__/splits")
    if not isinstance(unknown, dict) or not isinstance(unknown.get("detail"), str):
        raise Fail(f"GET /__nope__/splits answered {excerpt(unknown, 120)}, without a detail message")
    return message + "; an unknown environment is 404"


def _supported(ctx: Context, fetched: Any, what: str) -> Any:
    """The JSON body, or None when the environment does not implement this method (501)."""
    if fetched.status == 501:
        return None
    return ctx.expect(fetched, 200, what)


@checks("36", "num_tasks, task, tasks and task_range answer; a bad index is 400, an extra key 422", since=NEWER)
async def tasks(ctx: Context) -> str:
    path = _env_path(ctx)
    if ctx.facts.splits is None:
        raise NotRun("not run: the splits were not listed (check 35)")
    if not ctx.facts.splits:
        raise Skip("the environment lists no splits")
    split = ctx.facts.splits[0]["name"]
    done: list[str] = []
    count = _supported(ctx, await ctx.post(f"{path}/num_tasks", {"split": split}), "num_tasks")
    if count is not None:
        if not isinstance(count, dict) or not is_int(count.get("num_tasks")):
            raise Fail(f"num_tasks answered {excerpt(count, 120)}, not {{'num_tasks': int}}")
        done.append(f"{count['num_tasks']} tasks in {split}")
    total = count["num_tasks"] if count is not None else None
    if total != 0:
        task = _supported(ctx, await ctx.post(f"{path}/task", {"split": split, "index": 0}), "task 0")
        if task is not None:
            if not isinstance(task, dict) or "task" not in task:
                raise Fail(f"task 0 answered {excerpt(task, 120)}, not {{'task': ...}}")
            done.append("task 0")
    far = await ctx.post(f"{path}/task", {"split": split, "index": 10**9})
    if far.status != 501:
        ctx.expect(far, 400, "task 10**9")
        done.append("a bad index is 400")
    if total is not None and total <= _MAX_LISTED_TASKS:
        listed = _supported(ctx, await ctx.post(f"{path}/tasks", {"split": split}), "tasks")
        if listed is not None:
            if not isinstance(listed, dict) or not isinstance(listed.get("tasks"), list) or "env_name" not in listed:
                raise Fail(f"tasks answered {excerpt(listed, 120)}, not {{'tasks': [...], 'env_name': ...}}")
            done.append("tasks")
    ranged = _supported(ctx, await ctx.post(f"{path}/task_range", {"split": split, "start": 0, "stop": 1}), "range")
    if ranged is not None:
        if not isinstance(ranged, dict) or not isinstance(ranged.get("tasks"), list):
            raise Fail(f"task_range answered {excerpt(ranged, 120)}, not {{'tasks': [...]}}")
        done.append("task_range")
    extra = await ctx.post(f"{path}/num_tasks", {"split": split, "__nope__": 1})
    if extra.status != 422:
        raise Fail(f"num_tasks with an unknown key answered {extra.status}, not 422")
    return "; ".join([*done, "an extra key is 422"])
