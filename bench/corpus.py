"""Deterministic, varied environment Spaces for the benchmarks: cards, READMEs, manifests, tags and likes.

Everything comes from one seeded `random.Random`, so two processes that generate the same
count with the same seed get byte-identical Spaces.
"""

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from catalog.models import Source

# Environment themes, most common first: their weights fall off like Zipf's law, so the last
# few are rare. Each theme belongs to a topic, and the topic becomes a tag.
THEMES: list[tuple[str, str]] = [
    ("coding", "coding"),
    ("chess", "games"),
    ("browser", "web"),
    ("math", "math"),
    ("wordle", "games"),
    ("tool", "tool-use"),
    ("maze", "games"),
    ("sudoku", "games"),
    ("trading", "finance"),
    ("robot", "robotics"),
    ("puzzle", "games"),
    ("terminal", "coding"),
    ("sql", "coding"),
    ("shopping", "web"),
    ("poker", "games"),
    ("theorem", "math"),
    ("gridworld", "games"),
    ("navigation", "robotics"),
    ("email", "tool-use"),
    ("calendar", "tool-use"),
    ("snake", "games"),
    ("tetris", "games"),
    ("blackjack", "games"),
    ("geometry", "math"),
    ("portfolio", "finance"),
    ("negotiation", "dialogue"),
    ("customer", "dialogue"),
    ("spreadsheet", "tool-use"),
    ("compiler", "coding"),
    ("drone", "robotics"),
    ("warehouse", "robotics"),
    ("atari", "games"),
    ("minigrid", "games"),
    ("crossword", "games"),
    ("algebra", "math"),
    ("protein", "science"),
    ("chemistry", "science"),
    ("kitchen", "robotics"),
    ("traffic", "simulation"),
    ("auction", "finance"),
    ("sokoban", "games"),
    ("connect4", "games"),
    ("checkers", "games"),
    ("battleship", "games"),
    ("minesweeper", "games"),
    ("go", "games"),
    ("shogi", "games"),
    ("mancala", "games"),
    ("nonogram", "games"),
    ("kakuro", "games"),
    ("hanabi", "games"),
    ("quoridor", "games"),
]
_THEME_WEIGHTS = [1 / (rank + 1) ** 1.1 for rank in range(len(THEMES))]

# A word almost no README contains: a Space mentions it with this probability.
RARE_WORD = "zugzwang"
_RARE_P = 0.0002

SUFFIXES = ["env", "arena", "gym", "bench", "lab", "world", "sim", "playground", "challenge", "tasks", "rl"]
GENERIC_TAGS = ["rl", "reinforcement-learning", "llm", "multi-turn", "text", "single-agent", "multi-agent", "mcp"]
LICENSES = ["mit", "apache-2.0", "bsd-3-clause", "cc-by-4.0", "other"]
EMOJIS = ["🎲", "♟️", "🧩", "🤖", "🧠", "🌐", "📈", "🧮", "🕹️", "🛠️", "🚀", "🐍"]
COLORS = ["red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"]

# Words of environment READMEs, most common first (again Zipf-like), mixed with plain English.
_WORDS = [
    "the", "a", "to", "of", "and", "in", "is", "for", "with", "each", "agent", "environment", "episode", "step",
    "reward", "action", "observation", "state", "policy", "task", "tool", "model", "server", "client",
    "returns", "an", "on", "by", "can", "as", "trainer", "training", "evaluation", "reset", "be", "this", "are",
    "from", "rollout", "llm", "when", "it", "or", "turn", "game", "player", "score", "steps", "new", "at", "after",
    "its", "one", "every", "level", "difficulty", "json", "schema", "websocket", "http", "api", "endpoint",
    "openenv", "docker", "fastapi", "python", "benchmark", "dense", "sparse", "curriculum", "random", "seed",
    "success", "failure", "terminal", "done", "info", "metrics", "verifier", "grader", "prompt", "completion",
    "multi", "single", "user", "assistant", "message", "history", "move", "moves", "board", "grid", "cell",
    "target", "goal", "budget", "time", "limit", "opponent", "solver", "valid", "invalid", "tests", "unit",
    "sandbox", "container", "file", "files", "command", "output", "input", "error", "feedback", "hint",
    "difficult", "easy", "hard", "medium", "simple", "fast", "slow", "small", "large", "long", "short", "open",
    "source", "trained",
]  # fmt: skip
_WORD_WEIGHTS = [1 / (rank + 1) ** 0.9 for rank in range(len(_WORDS))]
_SENTENCE_TEMPLATES = [
    "The {theme} environment gives the agent one {noun} per step and scores the {noun2}.",
    "Each episode starts a fresh {theme} {noun}; the reward is 1 on success and 0 otherwise.",
    "Actions are {theme} moves sent as JSON, and the observation shows the current {noun}.",
    "This {theme} {suffix} is built for training {agent} agents with GRPO or PPO.",
    "Use it to evaluate how well a model plays {theme} against a scripted opponent.",
    "Difficulty levels range from easy to hard, so a {theme} curriculum is easy to set up.",
    "The {theme} server keeps the {noun} in memory and resets it on every episode.",
    "We also ship a {theme2} variant that mixes {theme} with {theme2} tasks.",
]
_NOUNS = ["board", "puzzle", "task", "page", "state", "level", "map", "question", "position", "inventory"]
_ACTIONS = ["move", "play", "submit", "click", "type", "navigate", "buy", "sell", "guess", "run", "call", "place"]
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class EnvironmentSpec:
    """One generated environment Space: what the Hub lists, its files, and the row it becomes."""

    id: str
    author: str
    title: str
    emoji: str
    summary: str
    short_description: str | None
    tags: list[str]
    likes: int
    trending_score: float
    license: str
    body: str
    readme: str
    manifest: str
    manifest_data: dict[str, Any]
    card: dict[str, Any]
    datasets: list[str] = field(default_factory=list)
    last_modified: datetime = _EPOCH

    def files(self) -> dict[str, str]:
        return {"README.md": self.readme, "openenv.yaml": self.manifest}


def _owners(rng: random.Random, count: int) -> list[str]:
    first = ["open", "deep", "meta", "hug", "rl", "env", "agent", "smol", "tiny", "big", "neo", "lab", "gym"]
    second = ["mind", "lab", "ai", "works", "forge", "hub", "ops", "bench", "play", "research", "dev", "x"]
    owners: list[str] = []
    seen: set[str] = set()
    while len(owners) < count:
        name = f"{rng.choice(first)}{rng.choice(second)}"
        if rng.random() < 0.6:
            name += str(rng.randint(1, 999))
        if name not in seen:
            seen.add(name)
            owners.append(name)
    return owners


class Corpus:
    """Generates environment Spaces one after another from a seed."""

    def __init__(self, seed: int = 20261129, *, owners: int = 1500, datasets: int = 200) -> None:
        self.rng = random.Random(seed)
        self.owners = _owners(self.rng, owners)
        self._owner_weights = [1 / (rank + 1) ** 0.8 for rank in range(owners)]
        self.dataset_ids = [f"{self.rng.choice(self.owners)}/{self._theme()}-{i}-episodes" for i in range(datasets)]
        self.sentences = [self._sentence() for _ in range(3000)]
        self._names: set[str] = set()

    def _theme(self) -> str:
        return self.rng.choices(THEMES, _THEME_WEIGHTS)[0][0]

    def _sentence(self) -> str:
        words = self.rng.choices(_WORDS, _WORD_WEIGHTS, k=self.rng.randint(7, 18))
        return " ".join(words).capitalize() + "."

    def _paragraph(self, themes: list[str], suffix: str, sentences: int) -> str:
        rng = self.rng
        parts = rng.sample(self.sentences, sentences)
        for _ in range(rng.randint(1, 2)):
            template = rng.choice(_SENTENCE_TEMPLATES)
            parts.insert(
                rng.randrange(len(parts) + 1),
                template.format(
                    theme=themes[0],
                    theme2=themes[-1],
                    noun=rng.choice(_NOUNS),
                    noun2=rng.choice(_NOUNS),
                    suffix=suffix,
                    agent=rng.choice(["LLM", "tool-using", "RL", "reasoning", "coding"]),
                ),
            )
        return " ".join(parts)

    def _body(self, title: str, themes: list[str], suffix: str, summary: str, size: int) -> str:
        rng = self.rng
        class_name = "".join(w.capitalize() for w in _SLUG.split(title.lower()) if w) + "Env"
        sections = [f"# {title}\n\n{summary}\n"]
        headings = ["Overview", "Observation space", "Reward", "Difficulty", "Evaluation", "Notes", "Limitations"]
        actions = rng.sample(_ACTIONS, 3)
        sections.append(
            "## Action space\n\n" + "\n".join(f"- `{a}`: {self._paragraph(themes, suffix, 1)}" for a in actions) + "\n"
        )
        sections.append(
            "## Quick start\n\n```python\n"
            f"from {themes[0]}_env import {class_name}, {class_name[:-3]}Action\n\n"
            f'with {class_name}(base_url="http://localhost:8000").sync() as env:\n'
            "    result = env.reset()\n"
            f'    result = env.step({class_name[:-3]}Action({actions[0]}="..."))\n'
            "    print(result.reward, result.done)\n```\n"
        )
        length = sum(len(s) for s in sections)
        while length < size:
            section = f"## {rng.choice(headings)}\n\n{self._paragraph(themes, suffix, rng.randint(2, 5))}\n"
            sections.insert(rng.randint(1, len(sections)), section)
            length += len(section) + 1
        if rng.random() < _RARE_P * 2:  # some short descriptions mention it too (see space())
            sections.append(f"Endgames here often reach {RARE_WORD}.\n")
        return "\n".join(sections)

    def space(self, index: int) -> EnvironmentSpec:
        """The next Space; `index` only seeds its last-modified time."""
        rng = self.rng
        themes = list(dict.fromkeys(self._theme() for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))))
        topics = list(dict.fromkeys(dict(THEMES)[t] for t in themes))
        suffix = rng.choice(SUFFIXES)
        owner = rng.choices(self.owners, self._owner_weights)[0]
        name = f"{themes[0]}-{suffix}"
        if themes[-1] != themes[0]:
            name = f"{themes[0]}-{themes[-1]}-{suffix}"
        space_id = f"{owner}/{name}"
        serial = 2
        while space_id.lower() in self._names:
            space_id = f"{owner}/{name}-v{serial}"
            serial += 1
        self._names.add(space_id.lower())
        title = " ".join(w.capitalize() for w in name.split("-"))
        if rng.random() < 0.3:
            title += " " + rng.choice(["for LLM agents", "RL environment", "(OpenEnv)", "v2", "benchmark"])
        summary = self._paragraph(themes, suffix, rng.randint(1, 2))[:300].rsplit(" ", 1)[0] + "."
        short_description = None
        if rng.random() < 0.7:
            short_description = f"A {' and '.join(themes)} environment for {rng.choice(['LLM', 'RL', 'tool'])} agents"
            if RARE_WORD not in summary and rng.random() < _RARE_P:
                short_description += f" that punishes {RARE_WORD}"
        tags = ["openenv", *topics, *rng.sample(GENERIC_TAGS, rng.randint(0, 3))]
        likes = min(int(rng.paretovariate(1.1)) - 1, 50_000)
        trending = round(likes * rng.random() / 10, 2)
        license_ = rng.choice(LICENSES)
        emoji = rng.choice(EMOJIS)
        datasets = rng.sample(self.dataset_ids, 1) if rng.random() < 0.1 else []
        body = self._body(title, themes, suffix, summary, rng.randint(700, 3600))
        card: dict[str, Any] = {
            "title": title,
            "emoji": emoji,
            "colorFrom": rng.choice(COLORS),
            "colorTo": rng.choice(COLORS),
            "sdk": "docker",
            "app_port": 8000,
            "base_path": "/web",
            "pinned": False,
            "license": license_,
        }
        if short_description:
            card["short_description"] = short_description
        card["tags"] = tags
        if datasets:
            card["datasets"] = datasets
        front = [f"title: {title}", f"emoji: {emoji}"]
        front += [
            f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
            for k, v in card.items()
            if k not in ("title", "emoji", "tags", "datasets")
        ]
        front += ["tags:", *(f"  - {t}" for t in tags)]
        if datasets:
            front += ["datasets:", *(f"  - {d}" for d in datasets)]
        readme = "---\n" + "\n".join(front) + "\n---\n" + body
        slug = _SLUG.sub("_", name)
        manifest_data: dict[str, Any] = {
            "spec_version": 1,
            "name": slug,
            "type": "space",
            "runtime": "fastapi",
            "app": "server.app:app",
            "port": 8000,
        }
        manifest = "".join(f"{k}: {v}\n" for k, v in manifest_data.items())
        return EnvironmentSpec(
            id=space_id,
            author=owner,
            title=title,
            emoji=emoji,
            summary=summary,
            short_description=short_description,
            tags=tags,
            likes=likes,
            trending_score=trending,
            license=license_,
            body=body,
            readme=readme,
            manifest=manifest,
            manifest_data=manifest_data,
            card=card,
            datasets=datasets,
            last_modified=_EPOCH + timedelta(minutes=index * 7 + rng.randint(0, 6)),
        )

    def spaces(self, count: int) -> Iterator[EnvironmentSpec]:
        for index in range(count):
            yield self.space(index)

    def dataset(self, index: int) -> dict[str, Any]:
        """Arguments for FakeHub.add_dataset: tagged openenv, a quarter also rl-environment."""
        rng = self.rng
        tags = ["openenv", "rl-environment"] if index % 4 == 0 else ["openenv"]
        card: dict[str, Any] = {"pretty_name": f"Episodes {index}", "license": rng.choice(LICENSES)}
        return {
            "dataset_id": self.dataset_ids[index],
            "tags": [*tags, "size_categories:1K<n<10K"],
            "card_data": card,
            "likes": min(int(rng.paretovariate(1.3)) - 1, 5000),
            "downloads": int(rng.paretovariate(0.8)),
            "description": f"Rollouts recorded in environment {index}.",
        }


def environment_row(spec: EnvironmentSpec, *, sha: str) -> dict[str, Any]:
    """The catalog row a sync writes for this Space (the shape of `catalog.sync.index_space`)."""
    return {
        "id": spec.id,
        "source": Source.HUB,
        "title": spec.title,
        "emoji": spec.emoji,
        "description": spec.short_description or spec.summary,
        "license": spec.license,
        "app_port": 8000,
        "base_path": "/web",
        "card": spec.card,
        "manifest": spec.manifest_data,
        "readme": spec.body,
        "problems": [],
        "author": spec.author,
        "likes": spec.likes,
        "trending_score": spec.trending_score,
        "sdk": "docker",
        "tags": spec.tags,
        "runtime_stage": "RUNNING",
        "host": f"https://{_SLUG.sub('-', spec.id.lower())}.hf.space",
        "last_modified": spec.last_modified,
        "sha": sha,
        "removed_at": None,
        "indexed_at": _EPOCH,
    }
