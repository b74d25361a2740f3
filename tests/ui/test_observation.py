"""Observations shown readably: text, layout, images, fields, legal actions, errors, tool results."""

import base64
import io

from PIL import Image

from app.ui.observation import legal_html, observation_view, render_view, stats_html
from protocol.observations import image_data_uri


def png_base64(size: int = 8) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "navy").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_images_are_recognised_by_their_bytes() -> None:
    png = png_base64()
    assert image_data_uri(png) == f"data:image/png;base64,{png}"
    assert image_data_uri(f"data:image/png;base64,{png}") == f"data:image/png;base64,{png}"
    assert image_data_uri("data:text/html;base64,PHNjcmlwdD4=") is None
    assert image_data_uri("a perfectly ordinary sentence that is long enough to check") is None
    assert image_data_uri(base64.b64encode(b"not an image at all, just bytes").decode()) is None


def test_a_maze_observation() -> None:
    png = png_base64()
    view = observation_view(
        {
            "grid": "#####\n#A..#\n###E#",
            "image_png_base64": png,
            "position": [1, 1],
            "steps_left": 5,
            "message": "You moved **right**.",
            "error": None,
            "metadata": {},
        }
    )
    kinds = [(p.kind, p.label) for p in view.parts]
    assert kinds == [
        ("board", "grid"), ("text", "grid"), ("image", "image_png_base64"), ("markdown", "message"), ("fields", "")
    ]  # fmt: skip
    assert view.tree == {"image_png_base64": f"<image/png image, {len(png) * 3 // 4:,} bytes>", "position": [1, 1]}
    assert view.error is None and view.legal_actions == []
    html = render_view(view)
    beside = html.split('<div class="obs-beside">', 1)[1]  # the board drawn, the image next to it, the text folded
    assert beside.index('class="board board-maze"') < beside.index(f'src="data:image/png;base64,{png}"')
    assert '<summary>grid as text</summary><pre class="obs-text">#####\n#A..#\n###E#</pre>' in html
    assert "<strong>right</strong>" in html and "<th>steps left</th><td>5</td>" in html
    assert '<div class="obs-label">image</div>' in html and "image_png_base64" not in html


def test_legal_actions_and_errors() -> None:
    view = observation_view({"board": ". .\n. .", "legal_actions": [0, 1, 5], "error": "Column 9 does not exist"})
    assert view.legal_actions == [0, 1, 5]
    assert view.error == "Column 9 does not exist"
    buttons = legal_html(view.legal_actions)
    assert buttons.count('class="legal"') == 3 and 'data-index="2">5<' in buttons
    assert legal_html([]) == ""


def test_an_mcp_tool_result() -> None:
    view = observation_view(
        {
            "tool_name": "calculate",
            "result": {"content": [{"type": "text", "text": "98"}], "data": 98, "is_error": False},
            "error": {"error_type": "tool_not_found", "message": "Unknown tool: 'nope'"},
        }
    )
    assert [(p.kind, p.value) for p in view.parts if p.kind == "markdown"] == [
        ("markdown", "calculate"),
        ("markdown", "98"),
    ]
    assert view.tree["result"] == 98
    assert view.error == "tool_not_found: Unknown tool: 'nope'"


def test_text_from_the_environment_cannot_inject_markup() -> None:
    html = render_view(observation_view({"message": "<img src=x onerror=alert(1)>", "board": "<b>\n</b>"}))
    assert "<img" not in html and "<b>" not in html and "&lt;b&gt;" in html


def test_stats() -> None:
    html = stats_html(0.5, True, 1.25, 3)
    assert 'data-stat="reward"><span>reward</span><b>0.5</b>' in html
    assert 'data-stat="done"><span>done</span><b>yes</b>' in html
    assert "<b>1.25</b>" in html and "<b>3</b>" in html and 'class="stats done"' in html
    assert "<b>null</b>" in stats_html(None, False, 0.0, 0)


def test_a_tool_result_keeps_the_question_of_the_reset() -> None:
    reset = {"task_id": "t1", "question": "How much is 2 * (3 + 4) ^ 2?", "tools": ["calculate"], "message": "Play."}
    step = {"result": {"content": [{"type": "text", "text": "98"}]}, "error": None}
    shown = [(p.label, p.value) for p in observation_view(step, reset).parts]
    assert shown[:2] == [
        ("task_id (from the reset)", "t1"),
        ("question (from the reset)", "How much is 2 * (3 + 4) ^ 2?"),
    ]
    assert ("result", "98") in shown
    assert [p.label for p in observation_view(reset, reset).parts if "reset" in p.label] == []  # the reset itself
