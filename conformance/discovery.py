"""Checklist items 1-11: discovery and health, then HTTP control in simulation mode."""

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from conformance.context import Context, Fail, NotRun, Skip, excerpt, is_int, is_number
from conformance.engine import NEWER, Registry

checks: Registry[Context] = Registry()

_METADATA_KEYS = ("readme_content", "version", "author", "documentation_url")
_CONTROL = ("/reset", "/step", "/state")


@checks("1", 'GET /health answers 200 {"status": "healthy"}')
async def health(ctx: Context) -> str:
    body = ctx.expect(await ctx.get("/health"), 200, "GET /health")
    if not isinstance(body, dict) or body.get("status") != "healthy":
        raise Fail(f'GET /health answered {excerpt(body, 120)}, not {{"status": "healthy"}}')
    return "healthy"


@checks("2", "GET /metadata describes the environment")
async def metadata(ctx: Context) -> str:
    body = ctx.expect(await ctx.get("/metadata"), 200, "GET /metadata")
    if not isinstance(body, dict):
        raise Fail(f"GET /metadata answered {type(body).__name__}, not an object")
    wrong = [k for k in ("name", "description") if not isinstance(body.get(k), str)]
    if wrong:
        raise Fail(f"metadata {' and '.join(wrong)} must be strings")
    missing = [k for k in _METADATA_KEYS if k not in body]
    if missing:
        raise Fail(f"metadata lacks the keys {', '.join(missing)} (they may be null, but must be there)")
    ctx.facts.metadata = body
    return f"{body['name']}: {excerpt(body['description'], 80)}"


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return f"is {type(schema).__name__}, not a JSON Schema object"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
        return f"is not a valid JSON Schema (at {where}: {excerpt(exc.message, 120)})"
    return None


@checks("3", "GET /schema gives JSON Schemas for action, observation and state")
async def schema(ctx: Context) -> str:
    body = ctx.expect(await ctx.get("/schema"), 200, "GET /schema")
    if not isinstance(body, dict):
        raise Fail(f"GET /schema answered {type(body).__name__}, not an object")
    ctx.facts.schema = body
    ctx.facts.reset_observation = "reset_observation" in body
    problems = [
        f"{part} {problem}"
        for part in ("action", "observation", "state")
        if (problem := _schema_problem(body.get(part)))
    ]
    if problems:
        raise Fail("; ".join(problems))
    return "action, observation and state are valid JSON Schemas"


@checks("3b", "GET /schema also gives reset_observation", since=NEWER)
async def reset_observation(ctx: Context) -> str:
    body = _schema_or_not_run(ctx)
    if "reset_observation" not in body:
        raise Skip("no reset_observation: an older server (before openenv 0.10)")
    problem = _schema_problem(body["reset_observation"])
    if problem:
        raise Fail(f"reset_observation {problem}")
    return "reset_observation is a valid JSON Schema"


def _schema_or_not_run(ctx: Context) -> dict[str, Any]:
    if ctx.facts.schema is None:
        raise NotRun("not run: there is no /schema to read (check 3)")
    return ctx.facts.schema


def _properties(schema: Any) -> dict[str, Any]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return properties if isinstance(properties, dict) else {}


@checks("4", "The observation has done, reward and metadata; the state has episode_id and step_count")
async def base_fields(ctx: Context) -> str:
    body = _schema_or_not_run(ctx)
    observation, state = _properties(body.get("observation")), _properties(body.get("state"))
    missing = [f"observation.{k}" for k in ("done", "reward", "metadata") if k not in observation]
    missing += [f"state.{k}" for k in ("episode_id", "step_count") if k not in state]
    if missing:
        raise Fail(f"the schema lacks {', '.join(missing)}")
    done = observation["done"]
    if not isinstance(done, dict) or done.get("type") != "boolean" or done.get("default", False) is not False:
        raise Fail(f"observation.done must be a boolean defaulting to false, not {excerpt(done, 120)}")
    return "all base fields are declared"


@checks("5", "The action schema is a closed object (additionalProperties: false)")
async def closed_action(ctx: Context) -> str:
    action = _schema_or_not_run(ctx).get("action")
    if not isinstance(action, dict) or action.get("type") != "object":
        kind = action.get("type") if isinstance(action, dict) else action
        raise Fail(f"the action schema's type is {excerpt(kind, 60)}, not object")
    if action.get("additionalProperties") is not False:
        raise Fail("the action schema allows unknown fields (additionalProperties is not false)")
    return "type object, additionalProperties false"


@checks("6", "GET /openapi.json is the OpenEnv Environment HTTP API 1.0.0")
async def openapi(ctx: Context) -> str:
    body = ctx.expect(await ctx.get("/openapi.json"), 200, "GET /openapi.json")
    info = body.get("info") if isinstance(body, dict) else None
    paths = body.get("paths") if isinstance(body, dict) else None
    if isinstance(paths, dict):
        ctx.facts.paths = set(paths)
    if not isinstance(info, dict):
        raise Fail("openapi.json has no info object")
    title, version = info.get("title"), info.get("version")
    if title != "OpenEnv Environment HTTP API" or version != "1.0.0":
        raise Fail(f"info is {excerpt(title, 60)!s} {excerpt(version, 20)!s}, not 'OpenEnv Environment HTTP API' 1.0.0")
    return f"{title} {version}"


@checks("7", "/reset, /step and /state are all served (simulation) or all absent (production)")
async def mode(ctx: Context) -> str:
    if ctx.facts.paths is None:
        raise NotRun("not run: openapi.json listed no paths (check 6)")
    present = [p for p in _CONTROL if p in ctx.facts.paths]
    if len(present) == len(_CONTROL):
        ctx.facts.mode = "simulation"
        return "simulation mode"
    if present:
        raise Fail(f"only {', '.join(present)} of /reset, /step, /state are in openapi.json")
    ctx.facts.mode = "production"
    status = (await ctx.post("/reset", {})).status
    if status != 404:
        raise Fail(f"production mode, yet POST /reset answered {status}, not 404")
    return "production mode: POST /reset is 404"


def _simulation_only(ctx: Context) -> None:
    if ctx.facts.mode == "production":
        raise Skip("production mode: /reset, /step and /state are not served")


def _first_error(body: Any) -> dict[str, Any]:
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, list) or not detail or not isinstance(detail[0], dict):
        raise Fail(f"the 422 body has no pydantic error list in detail: {excerpt(body, 160)}")
    return detail[0]


@checks("8", "POST /reset {} answers an observation envelope")
async def http_reset(ctx: Context) -> str:
    _simulation_only(ctx)
    body = ctx.expect(await ctx.post("/reset", {}), 200, "POST /reset")
    if not isinstance(body, dict):
        raise Fail("POST /reset did not answer an object")
    extra = set(body) - {"observation", "reward", "done", "metadata"}
    missing = {"observation", "reward", "done"} - set(body)
    if missing or extra:
        raise Fail(f"the envelope's keys are {sorted(body)}; expected observation, reward, done and metadata")
    if not isinstance(body["observation"], dict):
        raise Fail("observation is not an object")
    if body["reward"] is not None and not is_number(body["reward"]):
        raise Fail(f"reward is {excerpt(body['reward'], 40)}, not a number or null")
    if not isinstance(body["done"], bool):
        raise Fail(f"done is {excerpt(body['done'], 40)}, not a boolean")
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise Fail("metadata is neither an object nor null")
    return "observation, reward, done" + (", metadata" if "metadata" in body else " (no metadata key: an older server)")


@checks("9", 'POST /reset {"seed": -1} is refused with 422 at body.seed')
async def http_reset_invalid(ctx: Context) -> str:
    _simulation_only(ctx)
    error = _first_error(ctx.expect(await ctx.post("/reset", {"seed": -1}), 422, "POST /reset with seed -1"))
    if error.get("loc") != ["body", "seed"]:
        raise Fail(f"the error is at {excerpt(error.get('loc'), 60)}, not ['body', 'seed']")
    return "422 at body.seed"


@checks("10", "POST /step without an action, or with an unknown field, is refused with 422")
async def http_step_invalid(ctx: Context) -> str:
    _simulation_only(ctx)
    error = _first_error(ctx.expect(await ctx.post("/step", {}), 422, "POST /step {}"))
    if error.get("loc") != ["body", "action"] or error.get("type") != "missing":
        raise Fail(f"the error is {excerpt(error, 160)}, not a missing body.action")
    bad = ctx.expect(await ctx.post("/step", {"action": {"__nope__": 1}}), 422, "POST /step with an unknown field")
    _first_error(bad)
    return "422 for a missing action and for an unknown field"


@checks("11", "GET /state answers step_count and episode_id")
async def http_state(ctx: Context) -> str:
    _simulation_only(ctx)
    body = ctx.expect(await ctx.get("/state"), 200, "GET /state")
    if not isinstance(body, dict):
        raise Fail("GET /state did not answer an object")
    if not is_int(body.get("step_count")) or body["step_count"] < 0:
        raise Fail(f"step_count is {excerpt(body.get('step_count'), 40)}, not an integer >= 0")
    if "episode_id" in body and body["episode_id"] is not None and not isinstance(body["episode_id"], str):
        raise Fail("episode_id is neither a string nor null")
    return f"step_count {body['step_count']}"


@checks("37", "The web UI: GET / redirects to /web/, which serves the app and /web/metadata")
async def web_ui(ctx: Context) -> str:
    root = await ctx.get("/", follow_redirects=False)
    location = root.headers.get("location", "")
    if root.status not in (301, 302, 307, 308) or not location.rstrip("/").endswith("/web"):
        raise Skip(f"no web UI: GET / answered {root.status}" + (f" to {location}" if location else ""))
    ctx.facts.web_ui = True
    if root.status != 307:
        raise Fail(f"GET / redirected with {root.status}, not 307")
    page = await ctx.get("/web/")
    if page.status != 200 or "html" not in page.headers.get("content-type", ""):
        raise Fail(f"GET /web/ answered {page.status} {page.headers.get('content-type', '')}, not an HTML page")
    body = ctx.expect(await ctx.get("/web/metadata"), 200, "GET /web/metadata")
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise Fail("GET /web/metadata is not environment metadata")
    return f"web UI for {body['name']}"


@checks("38", "The web UI's GET /web/state answers, without disturbing the shared instance")
async def web_state(ctx: Context) -> str:
    if not ctx.facts.web_ui:
        raise Skip("no web UI")
    # /web/* drives one instance shared by every visitor of the page: the checker reads it and
    # sends nothing that would reset or move someone's game.
    fetched = await ctx.get("/web/state")
    if fetched.status == 409:
        return "409: no episode has been started in the web UI yet"
    state = ctx.expect(fetched, 200, "GET /web/state")
    if not isinstance(state, dict) or not is_int(state.get("step_count")):
        raise Fail("GET /web/state has no integer step_count")
    return f"step_count {state['step_count']}"
