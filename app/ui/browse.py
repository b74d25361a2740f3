"""The browse page: search as you type, filters, sort, result cards and pages."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
from sqlalchemy import Engine
from sqlmodel import Session

from app.ui.cards import pages, results_html, summary
from catalog.models import Source, Verdict
from catalog.search import EnvironmentQuery, Sort, catalog_extent, search_environments
from catalog.store import list_tags
from hosting.endpoints import EndpointManager

PAGE_SIZE = 12
DEFAULT_FILTERS: list[Any] = ["", "relevance", [], "", "", False, False, [], False]  # in Browse.filters order
SORTS = [
    ("Relevance", "relevance"),
    ("Likes", "likes"),
    ("Trending", "trending"),
    ("Recently updated", "updated"),
    ("Quality", "quality"),
]
# A set of verdicts rather than a minimum: "pass", "pass or warn", and also "fail" (what an author fixes).
VERDICTS = [("Passes", "pass"), ("Warns", "warn"), ("Fails", "fail")]
SOURCES = [("Any source", ""), ("Hub Spaces", "hub"), ("Built-in", "template"), ("Added by URL", "url")]
STAGES = [
    ("Any status", ""),
    ("Running", "RUNNING"),
    ("Sleeping", "SLEEPING"),
    ("Building", "BUILDING"),
    ("Paused", "PAUSED"),
    ("Runtime error", "RUNTIME_ERROR"),
]
# Clicking a card opens it in place, a modified click (new tab) follows the card's ?env= link; a tag filters by it.
CARD_CLICKS = """
element.addEventListener('click', (event) => {
  const tag = event.target.closest('[data-tag]');
  if (tag) {
    event.preventDefault();
    trigger('click', {tag: tag.dataset.tag});
    return;
  }
  const card = event.target.closest('[data-env]');
  if (!card || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  trigger('click', {env: card.dataset.env});
});
"""


@dataclass(frozen=True)
class Browse:
    query: gr.Textbox
    sort: gr.Dropdown
    tags: gr.Dropdown
    source: gr.Dropdown
    status: gr.Dropdown
    has_tools: gr.Checkbox
    has_tasks: gr.Checkbox
    quality: gr.Dropdown
    teaches: gr.Checkbox
    summary: gr.Markdown
    results: gr.HTML
    previous: gr.Button
    page_label: gr.Markdown
    next: gr.Button
    page: gr.State

    @property
    def filters(self) -> list[Any]:
        return [
            self.query, self.sort, self.tags, self.source, self.status, self.has_tools, self.has_tasks, self.quality,
            self.teaches,
        ]  # fmt: skip

    @property
    def outputs(self) -> list[Any]:
        return [self.summary, self.results, self.page, self.page_label, self.previous, self.next]


def build() -> Browse:
    with gr.Row(equal_height=True):
        query = gr.Textbox(
            placeholder="Search environments: wordle, chess, tool use…",
            label="Search environments",
            show_label=False,
            scale=5,
            elem_id="search",
            autofocus=True,
        )
        sort = gr.Dropdown(
            SORTS, value="relevance", label="Sort by", show_label=False, scale=1, elem_id="sort", container=False
        )
    with gr.Row(equal_height=True):
        tags = gr.Dropdown([], multiselect=True, label="Tags", scale=3, elem_id="tags")
        source = gr.Dropdown(SOURCES, value="", label="Source", scale=1, elem_id="source")
        status = gr.Dropdown(STAGES, value="", label="Status", scale=1, elem_id="status")
        quality = gr.Dropdown(VERDICTS, value=[], multiselect=True, label="Quality report", scale=1, elem_id="quality")
        with gr.Column(scale=1, min_width=140):
            has_tools = gr.Checkbox(label="Has MCP tools", elem_id="has-tools")
            has_tasks = gr.Checkbox(label="Has tasks", elem_id="has-tasks")
            teaches = gr.Checkbox(label="Teaches", elem_id="teaches")
    result_summary = gr.Markdown(elem_id="result-summary")
    results = gr.HTML(elem_id="results", js_on_load=CARD_CLICKS)
    with gr.Row(elem_id="pager"):
        previous = gr.Button("← Previous", size="sm", interactive=False, elem_id="previous")
        page_label = gr.Markdown(elem_id="page-label")
        following = gr.Button("Next →", size="sm", interactive=False, elem_id="next")
    return Browse(
        query, sort, tags, source, status, has_tools, has_tasks, quality, teaches, result_summary, results, previous,
        page_label, following, gr.State(0),
    )  # fmt: skip


def run_search(engine: Engine, endpoints: EndpointManager, filters: Sequence[Any], page: int) -> tuple[Any, ...]:
    """One page of results for the filters' values (in Browse.filters order), with the summary and pager."""
    q, sort, tags, source, status, has_tools, has_tasks, quality, teaches = filters
    query = EnvironmentQuery(
        q=(q or "")[:500],
        tags=(tags or [])[:20],
        source=Source(source) if source else None,
        stage=status or None,
        has_tools=bool(has_tools),
        has_tasks=bool(has_tasks),
        quality=[Verdict(v) for v in quality or []][:3],
        teaches=bool(teaches),
        sort=Sort(sort or "relevance"),
        limit=PAGE_SIZE,
        offset=max(0, page) * PAGE_SIZE,
    )
    with Session(engine) as session:
        found, count = search_environments(session, query)
        indexed = catalog_extent(session).describe() if not found else ""
    total_pages = pages(count, PAGE_SIZE)
    page = min(max(0, page), total_pages - 1)
    return (
        summary(count, query.offset, len(found)),
        results_html(found, endpoints.active_by_environment() if found else {}, q or "", indexed),
        page,
        f"Page {page + 1} of {total_pages}",
        gr.Button(interactive=page > 0),
        gr.Button(interactive=page + 1 < total_pages),
    )


def carry_first_page(blocks: gr.Blocks, browse: Browse, values: dict[Any, Any]) -> None:
    """Make the default search's first page (no words, no filters) part of the page itself, so that its cards show
    as the page mounts rather than after its first event's round trip. Each load of the page searches again and
    keeps what the next one carries current. The cards are the same for every visitor: they show nothing of who
    looks."""
    carried: dict[Any, Any] = {browse.summary: values[browse.summary], browse.results: values[browse.results]}
    carried[browse.page_label] = values[browse.page_label]
    by_id = {component._id: component.postprocess(value) for component, value in carried.items()}
    for component in carried:
        component.value = by_id[component._id]  # what Gradio's page is made from, should it be made again
    config = getattr(blocks, "config", None)  # the page as served, once the UI is mounted
    for entry in config["components"] if config else []:
        if entry["id"] in by_id:
            entry["props"]["value"] = by_id[entry["id"]]


def tag_choices(engine: Engine, *, chosen: str | None = None) -> Any:
    """The tag filter's choices, the most used first; `chosen` is chosen (and listed, however rare)."""
    with Session(engine) as session:
        listed = [(f"{tag} ({count})", tag) for tag, count in list_tags(session, limit=60)]
    if chosen is None:
        return gr.Dropdown(choices=listed)
    if chosen not in [tag for _, tag in listed]:
        listed.append((chosen, chosen))
    return gr.Dropdown(choices=listed, value=[chosen])


def wire(engine: Engine, endpoints: EndpointManager, browse: Browse) -> None:
    def first_page(*values: Any) -> tuple[Any, ...]:
        return run_search(engine, endpoints, values, 0)

    def turn(by: int) -> Any:
        def go(*values: Any) -> tuple[Any, ...]:
            *filters, page = values
            return run_search(engine, endpoints, filters, page + by)

        return go

    common: dict[str, Any] = {"show_progress": "hidden", "queue": False}
    keep_url = (
        "(q) => { const u = new URL(location); u.searchParams.delete('env'); "
        "q ? u.searchParams.set('q', q) : u.searchParams.delete('q'); history.replaceState(null, '', u); }"
    )
    browse.query.input(first_page, browse.filters, browse.outputs, trigger_mode="always_last", **common)
    browse.query.submit(first_page, browse.filters, browse.outputs, **common)
    browse.query.input(None, [browse.query], None, js=keep_url, queue=False)
    for control in browse.filters[1:]:
        control.change(first_page, browse.filters, browse.outputs, **common)
    browse.previous.click(turn(-1), [*browse.filters, browse.page], browse.outputs, **common)
    browse.next.click(turn(1), [*browse.filters, browse.page], browse.outputs, **common)
