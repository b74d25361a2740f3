"""The web UI in a real browser on loopback: time to a usable browse page, search-to-results
over a 10,000-environment catalog, and the playground's step, click to the updated observation.

    .venv/bin/python -m bench.ui [--environments 10000] [--loads 10] [--steps 60] [--checkout DIR --rounds 2]

envhub runs as its own process (`python -m app serve`) on a SQLite catalog of generated
Spaces (bench/corpus.py) plus the built-in templates; the system Chromium, driven by
Playwright, loads pages and clicks as a person would. Floors: browse page p50 ≤ 1.0 s (warm
server), search ≤ 500 ms; a step, p50 ≤ 150 ms and p95 ≤ 300 ms: wordle's Step button, and each built-in
board played as a person plays it (the maze's arrow buttons, a Lights Out cell, a Connect Four column, a
wordle guess and Enter), 60 steps each. With
--checkout DIR, another checkout of envhub (an earlier commit: `git worktree add DIR <commit>`)
has its browse page and steps timed in the same run, rounds alternating between the two.
"""

import argparse
import hashlib
import itertools
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from sqlmodel import Session

from app.settings import REPO_ROOT
from bench.corpus import Corpus, environment_row
from bench.envhub import envhub_process
from bench.report import load_average, machine_line, percentile, table, verdict
from catalog.store import write_environments
from core.db import create_db_engine, init_db
from tests.ui.browser import chromium

BROWSE_FLOOR_MS = 1000.0  # at p50
SEARCH_FLOOR_MS = 500.0
STEP_P50_FLOOR_MS, STEP_P95_FLOOR_MS = 150.0, 300.0
# The cards (or the empty state), not the component around them, whose status classes change first.
RESULTS = "document.querySelector('#results .env-grid, #results .empty-state')?.outerHTML"
RESULTS_CHANGED = f"() => {RESULTS} !== window.__before"
# Timed by the page itself: from the user's key press or click (seen in the capture phase,
# before Gradio's own handlers) to the next frame after the watched part shows the answer.
ARM = """({event, source, watch, ready}) => {
  window.__before = RESULTS_EXPR;
  const done = eval(ready);
  window.__measured = new Promise((resolve) => {
    document.querySelector(source).addEventListener(event, () => {
      const started = performance.now();
      const observer = new MutationObserver(() => {
        if (!done()) return;
        observer.disconnect();
        requestAnimationFrame(() => resolve(performance.now() - started));
      });
      observer.observe(document.querySelector(watch),
        {subtree: true, childList: true, characterData: true, attributes: true});
    }, {capture: true, once: true});
  });
}""".replace("RESULTS_EXPR", RESULTS)
# The page's own clock when it first saw the cards and the search box ready (asking for the time afterwards would add
# a round trip to the browser, 100 ms or more on two busy cores).
USABLE = """() => {
  const box = document.querySelector('#search textarea');
  return document.querySelector('.env-card') && box && !box.disabled && performance.now();
}"""
# Both ways a Play tab says it plays: connected anew, or to the caller's endpoint that was running already.
CONNECTED = "document.querySelector('#play-status').innerText.toLowerCase().includes('press reset')"
QUERIES = [
    "chess", "wordle", "maze navigation", "trading portfolio", "sokoban", "agent", "browser",
    "theorem", "wor", "coding sandbox", "zugzwang", "robot", "puzzle", "email calendar", "poker",
    "hanabi", "drone", "spreadsheet", "connect4", "environment",
]  # fmt: skip


def populate(database: Path, count: int, seed: int = 7) -> None:
    """Write generated Spaces into the catalog the way a sync does."""
    engine = create_db_engine(f"sqlite:///{database}")
    init_db(engine)
    spaces = Corpus(seed).spaces(count)
    with Session(engine) as session:
        while part := list(itertools.islice(spaces, 2000)):
            rows = [environment_row(s, sha=hashlib.sha1(s.id.encode()).hexdigest()) for s in part]
            write_environments(session, rows, {s.id: s.datasets for s in part})
        session.commit()
    engine.dispose()


def usable_browse_page(browser: Any, url: str, loads: int) -> list[float]:
    """Navigation start to result cards shown and the search box ready (the browser's own clock)."""
    times = []
    for _ in range(loads):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(url + "/", wait_until="commit")
        usable = page.wait_for_function(USABLE, polling=5, timeout=30_000)
        times.append(float(usable.json_value()))
        context.close()
    return times


def search_to_results(browser: Any, url: str) -> list[tuple[str, int, float]]:
    """Enter in the search box to the new result cards in the page, per query."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url + "/")
    page.wait_for_selector(".env-card", timeout=30_000)
    box = page.locator("#search textarea")
    results = []
    for query in ["warm up", *QUERIES]:
        box.fill(query)
        page.evaluate(
            ARM, {"event": "keydown", "source": "#search textarea", "watch": "#results", "ready": RESULTS_CHANGED}
        )
        box.press("Enter")
        elapsed = float(page.evaluate("window.__measured"))
        found = re.search(r"([\d,]+) environments?", page.locator("#result-summary").inner_text())
        count = int(found.group(1).replace(",", "")) if found else 0
        if query != "warm up":
            expected = httpx.get(f"{url}/api/environments", params={"q": query, "limit": 1}).json()["count"]
            if count != expected:
                raise RuntimeError(f"the page shows {count} results for {query!r}, the API {expected}")
            results.append((query, count, elapsed))
    page.close()
    return results


WORDS = (REPO_ROOT / "spaces_templates" / "wordle" / "server" / "words.txt").read_text().split()
STAT = "document.querySelector('#play-stats [data-stat=steps] b')"


def connected(page: Any) -> None:
    """Wait until the Play tab plays: connected to a new endpoint, or to the caller's own running one."""
    try:
        page.wait_for_function(CONNECTED, timeout=120_000)
    except PlaywrightTimeout as exc:
        said = page.locator("#play-status").inner_text(), page.locator("#play-errors").inner_text()
        raise RuntimeError(f"the Play tab did not connect; it says {said}") from exc


def step_round_trips(browser: Any, url: str, steps: int) -> list[tuple[float, float]]:
    """Click Step to the observation showing the guess, in wordle, with a new guess each step (a new game
    after every finished one, not timed); per step, the whole and the part that was the request to the server."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url + "/?env=template:wordle")
    page.wait_for_selector("#env-header h1", timeout=30_000)
    page.locator("#open-play").click()
    page.locator("#play-launch").click()
    connected(page)
    guess = page.locator("#field-guess textarea")
    times: list[tuple[float, float]] = []
    words = itertools.cycle(WORDS[::97])
    done = True
    while len(times) < steps + 3:
        if done:  # a new game
            page.locator("#play-reset").click()
            page.wait_for_function(f"{STAT} && {STAT}.innerText === '0'", timeout=30_000)
            count = 0
        word, count = next(words), count + 1
        guess.fill(word)
        drawn = f"() => {{ const b = {STAT}; return b && b.innerText === '{count}' && "
        # what an older page and this one both show of the answer: the board's text, a line per guess
        drawn += f"document.querySelector('#play-observation').textContent.includes('{word.upper()} '); }}"
        page.evaluate("performance.clearResourceTimings()")
        page.evaluate(ARM, {"event": "click", "source": "#play-step", "watch": "#play-observation", "ready": drawn})
        page.locator("#play-step").click()
        whole = float(page.evaluate("window.__measured"))
        request = float(
            page.evaluate(
                "Math.max(0, ...performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('/gradio_api/')).map(e => e.duration))"
            )
        )
        times.append((whole, request))
        done = page.locator("#play-stats [data-stat=done] b").inner_text() == "yes"
    page.close()
    return times[3:]  # the first clicks warm the session up


OBSERVATION = "document.querySelector('#play-observation').innerHTML"


# Per board, the event of a move and the element the page times it from.
MOVES = {
    "maze": ("click", "#play-controls"),
    "lights_out": ("click", "#play-observation"),
    "connect_four": ("click", "#play-observation"),
    "wordle": ("keydown", "#field-guess textarea"),
}


def press_on_board(page: Any, board: str, pick: random.Random) -> None:
    """One move as a person makes it on `board`: an arrow button, a cell, a column, or Enter in the guess box."""
    if board == "maze":
        page.locator("#play-controls button.direct").nth(pick.randrange(4)).click()
    elif board == "lights_out":
        cells = page.locator("#play-observation .board-lights button.cell")
        cells.nth(pick.randrange(cells.count())).click()
    elif board == "connect_four":
        columns = [int(b) for b in page.locator("#play-legal button.legal").all_inner_texts()]
        page.locator(f'#play-observation .board-discs button[aria-label="column {pick.choice(columns)}"]').click()
    else:
        page.locator("#field-guess textarea").press("Enter")


def board_round_trips(browser: Any, url: str, board: str, steps: int) -> list[tuple[float, float]]:
    """A move on the board (a click, or Enter for wordle) to the observation drawn again, with a new game after
    every finished one (not timed); per step, the whole and the part that was the request to the server."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/?env=template:{board}")
    page.wait_for_selector("#env-header h1", timeout=30_000)
    page.locator("#open-play").click()
    page.locator("#play-launch").click()
    connected(page)
    pick, words = random.Random(7), itertools.cycle(WORDS[::97])
    times: list[tuple[float, float]] = []
    done, count = True, 0
    while len(times) < steps + 3:
        if done:  # a new game
            page.locator("#play-reset").click()
            page.wait_for_function(f"{STAT} && {STAT}.innerText === '0'", timeout=30_000)
            count = 0
        if board == "wordle":
            page.locator("#field-guess textarea").fill(next(words))
        count += 1
        drawn = f"() => {STAT}?.innerText === '{count}' && {OBSERVATION} !== window.__observation"
        page.evaluate(f"() => {{ window.__observation = {OBSERVATION}; performance.clearResourceTimings(); }}")
        event, source = MOVES[board]
        page.evaluate(ARM, {"event": event, "source": source, "watch": "#play-observation", "ready": drawn})
        press_on_board(page, board, pick)
        whole = float(page.evaluate("window.__measured"))
        request = float(
            page.evaluate(
                "Math.max(0, ...performance.getEntriesByType('resource')"
                ".filter(e => e.name.includes('/gradio_api/')).map(e => e.duration))"
            )
        )
        times.append((whole, request))
        done = page.locator("#play-stats [data-stat=done] b").inner_text() == "yes"
    page.close()
    return times[3:]  # the first moves warm the session up


def step_rows(name: str, timed: list[tuple[float, float]]) -> list[list[object]]:
    whole, request = [w for w, _ in timed], [r for _, r in timed]
    rest = [w - r for w, r in timed]
    ok = percentile(whole, 0.5) <= STEP_P50_FLOOR_MS and percentile(whole, 0.95) <= STEP_P95_FLOOR_MS
    return [
        [f"{name}: click to observation", len(whole), percentile(whole, 0.5), percentile(whole, 0.95), max(whole),
         verdict(ok)],
        [f"{name}: of it, the request", len(request), percentile(request, 0.5), percentile(request, 0.95),
         max(request), ""],
        [f"{name}: of it, the page", len(rest), percentile(rest, 0.5), percentile(rest, 0.95), max(rest), ""],
    ]  # fmt: skip


def side_by_side(checkout: Path, rounds: int, steps: int, loads: int, environments: int) -> None:
    """Browse page loads and steps of this checkout and another, rounds alternating, each on a fresh envhub with a
    copy of the same generated catalog, written by that checkout's own code."""
    timed: dict[str, list[tuple[float, float]]] = {"after": [], "before": []}
    browsed: dict[str, list[float]] = {"after": [], "before": []}
    load = load_average()
    trees = {"before": checkout.resolve(), "after": REPO_ROOT}
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as catalogs, chromium() as browser:
        for name, tree in trees.items():  # each by its own code: the two may differ in their schema
            (Path(catalogs) / name).mkdir()
            database = str(Path(catalogs) / name / "envhub.db")
            write = f"from bench.ui import populate; populate({database!r}, {environments})"
            subprocess.run([sys.executable, "-c", write], cwd=tree, check=True)
        for _ in range(rounds):
            for name, tree in trees.items():
                with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
                    shutil.copy(Path(catalogs) / name / "envhub.db", Path(scratch) / "envhub.db")
                    with envhub_process(Path(scratch), tree / "spaces_templates", checkout=tree) as url:
                        browsed[name] += usable_browse_page(browser, url, loads)
                        timed[name] += step_round_trips(browser, url, steps)
    print(machine_line())
    print(f"load average before: {load}, after: {load_average()}; {rounds} rounds of {loads} loads and {steps} steps")
    rows = [
        *(
            [f"{name}: usable browse page", len(pages), percentile(pages, 0.5), percentile(pages, 0.95), max(pages),
             verdict(percentile(pages, 0.5) <= BROWSE_FLOOR_MS)]
            for name, pages in browsed.items()
        ),
        *step_rows("before", timed["before"]),
        *step_rows("after", timed["after"]),
    ]  # fmt: skip
    print(table(["measure", "samples", "p50 ms", "p95 ms", "max ms", "floor met"], rows))
    ratio = percentile(browsed["after"], 0.5) / percentile(browsed["before"], 0.5)
    print(f"browse page p50, after / before: {ratio:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--environments", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--checkout", type=Path, help="another checkout of envhub to time the steps of alongside")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.checkout is not None:
        side_by_side(args.checkout, args.rounds, args.steps, args.loads, args.environments)
        return
    with tempfile.TemporaryDirectory(prefix="envhub-bench-") as scratch:
        populate(Path(scratch) / "envhub.db", args.environments)
        load = load_average()
        with envhub_process(Path(scratch), REPO_ROOT / "spaces_templates") as url, chromium() as browser:
            steps = step_round_trips(browser, url, args.steps)
            boards = {board: board_round_trips(browser, url, board, args.steps) for board in MOVES}
            browse = usable_browse_page(browser, url, args.loads)
            searches = search_to_results(browser, url)
    search_ms = [s[2] for s in searches]
    print(machine_line())
    print(f"load average before: {load}; catalog: {args.environments:,} generated environments + 6 templates")
    print(table(["query", "results", "ms"], searches))
    print()
    rows = [
        ["usable browse page", len(browse), percentile(browse, 0.5), percentile(browse, 0.95), max(browse),
         verdict(percentile(browse, 0.5) <= BROWSE_FLOOR_MS)],
        ["search to results", len(search_ms), percentile(search_ms, 0.5), percentile(search_ms, 0.95), max(search_ms),
         verdict(max(search_ms) <= SEARCH_FLOOR_MS)],
        *step_rows("step (wordle, Step button)", steps),
        *(row for board, timed in boards.items() for row in step_rows(f"{board} move", timed)),
    ]  # fmt: skip
    print(table(["measure", "samples", "p50 ms", "p95 ms", "max ms", "floor met"], rows))
    print(f"floors: browse p50 ≤ {BROWSE_FLOOR_MS:g} ms, search ≤ {SEARCH_FLOOR_MS:g} ms, "
          f"step p50 ≤ {STEP_P50_FLOOR_MS:g} ms and p95 ≤ {STEP_P95_FLOOR_MS:g} ms")  # fmt: skip


if __name__ == "__main__":
    main()
