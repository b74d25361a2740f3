"""The Connect panel's TRL snippet, for every built-in template and pools of 1, 4, 8 and 64 sessions, read by real
trl 1.16 in the trainer's virtualenv: its GRPOConfig is accepted, its generation batch is one the pool holds (TRL
keeps that many sessions open for the whole run), and every tool method has the schema transformers builds from its
docstring. (tests/ui/test_snippets_run.py trains with one.)"""

import asyncio
import dataclasses
import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.ui.connect import target_for
from app.ui.snippets import trl
from tests.conftest import needs_trainer
from tests.corpus import corpus_envhub, launch_all
from tests.serving import TEMPLATES, Envhub
from tests.ui.test_snippets_run import probed

NAMES = tuple(sorted(p.name for p in TEMPLATES.iterdir() if (p / "openenv.yaml").is_file()))
POOLS = (1, 4, 8, 64)

pytestmark = [needs_trainer, pytest.mark.timeout(600)]

# Run by the trainer's python: each snippet's definitions (imports, ENV_URL, the environment class, the reward
# function) as pasted, then its GRPOConfig(...) with what its comment says to add on a CPU.
READ = textwrap.dedent(
    """
    import ast, inspect, json, sys
    from transformers.utils import get_json_schema
    from trl import GRPOConfig

    found = []
    for code in json.load(open(sys.argv[1])):
        tree = ast.parse(code)
        defined = {}
        kept = [n for n in tree.body if not isinstance(n, ast.Expr) and not ast.unparse(n).startswith("trainer")]
        exec(compile(ast.Module(kept, []), "snippet", "exec"), defined)
        methods = inspect.getmembers(defined["Environment"], inspect.isfunction)
        schemas = [get_json_schema(m) for name, m in methods if name != "reset" and not name.startswith("_")]
        call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "GRPOConfig")
        call.keywords += [ast.keyword(k, ast.Constant(v)) for k, v in (("use_cpu", True), ("bf16", False))]
        config = eval(ast.unparse(call), {"GRPOConfig": GRPOConfig})
        found.append({
            "tools": [s["function"]["name"] for s in schemas],
            "described": all(
                p.get("description") for s in schemas for p in s["function"]["parameters"]["properties"].values()
            ),
            "num_generations": config.num_generations,
            "train_batch": config.per_device_train_batch_size,
            "generation_batch_size": config.generation_batch_size,
        })
    print(json.dumps(found))
    """
)


@pytest.fixture(scope="module")
def envhub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envhub]:
    server = corpus_envhub(tmp_path_factory.mktemp("trl-snippets"), corpus=False)
    yield server
    server.stop()


def read_by_trl(python: Path, snippets: list[str], scratch: Path) -> list[dict[str, Any]]:
    (scratch / "snippets.json").write_text(json.dumps(snippets))
    done = subprocess.run(
        [str(python), "-c", READ, str(scratch / "snippets.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=scratch,
        env={"TRL_EXPERIMENTAL_SILENCE": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_every_template_gets_a_grpo_config_trl_accepts_and_the_pool_holds(
    envhub: Envhub, trainer_python: Path, tmp_path: Path
) -> None:
    running = launch_all(envhub, NAMES)
    cases, snippets = [], []
    for name in NAMES:
        url = running[name]["url"]
        target = target_for(url, name, asyncio.run(probed(url)))
        for sessions in POOLS:
            cases.append((name, sessions))
            snippets.append(trl(dataclasses.replace(target, sessions=sessions)))
    read_all = read_by_trl(trainer_python, snippets, tmp_path)
    for (name, sessions), code, read in zip(cases, snippets, read_all, strict=True):
        case = f"{name}, {sessions} sessions"
        assert read["tools"] and read["described"], case  # every argument of every tool described
        generations, batch = read["num_generations"], read["generation_batch_size"]
        assert generations >= 2 and batch % generations == 0 and batch % read["train_batch"] == 0, case
        if sessions >= 2:
            assert batch <= sessions and batch + generations > sessions, case  # the largest multiple it holds
        else:  # no GRPO batch fits: the smallest, and what to launch instead
            assert batch == 2 and "MAX_CONCURRENT_ENVS=8" in code, case
