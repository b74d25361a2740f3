"""Direct controls of the Play tab, read from the action form: a button per value of a one-choice action (the arrow
keys too, when the values are directions), and clicks on a drawn grid for an action of a row and a column, or of a
column alone. A click sends the step."""

import html
import json
from typing import Any

from app.ui.action_form import FormState
from app.ui.boards import Clicks, Hints
from app.ui.forms import FieldKind, FormField, action_from_form, visible
from envclient.interface import Interface

ARROW_KEYS = {
    "up": "ArrowUp", "north": "ArrowUp", "down": "ArrowDown", "south": "ArrowDown",
    "left": "ArrowLeft", "west": "ArrowLeft", "right": "ArrowRight", "east": "ArrowRight",
}  # fmt: skip
ARROWS = {"ArrowUp": "↑", "ArrowDown": "↓", "ArrowLeft": "←", "ArrowRight": "→"}
ROW_NAMES = ("row", "r", "y")
COLUMN_NAMES = ("col", "column", "c", "x")
MAX_BUTTONS = 24  # values of a choice drawn as buttons; more stay in the form's menu

# A click on a control sends its action (or a legal action's index); a control pressed from the keyboard gets the
# focus back once the observation it sent is drawn again, so that a keyboard player goes on from where they were.
CLICKS = """
element.addEventListener('click', (event) => {
  const control = event.target.closest('[data-action], [data-index]');
  if (!control || !element.contains(control)) return;
  const key = control.dataset.action ?? control.dataset.index;
  window.envhubRefocus = event.detail === 0 ? key : null;  // 0: pressed from the keyboard, not clicked
  if (control.dataset.action) trigger('click', {action: JSON.parse(control.dataset.action)});
  else trigger('click', {index: Number(control.dataset.index)});
});
new MutationObserver(() => {
  const key = window.envhubRefocus;
  if (!key || (document.activeElement && document.activeElement !== document.body)) return;
  const again = [...element.querySelectorAll('[data-action], [data-index]')]
    .find((control) => (control.dataset.action ?? control.dataset.index) === key);
  if (again) { window.envhubRefocus = null; again.focus({preventScroll: true}); }
}).observe(element, {childList: true, subtree: true});
"""
# The arrow keys press the direction buttons while the Play tab shows them, unless the focus is in a field that
# takes the keys itself.
ARROW_PRESSES = (
    CLICKS
    + """
if (!window.envhubArrows) {
  window.envhubArrows = true;
  document.addEventListener('keydown', (event) => {
    if (!event.key.startsWith('Arrow') || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.target.closest?.('input, textarea, select, [contenteditable], [role=tab], [role=listbox]')) return;
    const button = document.querySelector(`#play-controls button[data-key="${event.key}"]`);
    if (!button || button.offsetParent === null) return;
    event.preventDefault();
    button.click();
  });
}
"""
)


def _played(form: FormState) -> list[FormField]:
    """The fields a direct control fills: the required ones, or every one shown when none is required."""
    shown = visible(form.fields)
    return [f for f in shown if f.required] or shown


def choice_field(form: FormState) -> FormField | None:
    """The action's one field, when it is a choice of a few values."""
    played = _played(form)
    if len(played) == 1 and played[0].kind == FieldKind.CHOICE and len(played[0].choices) <= MAX_BUTTONS:
        return played[0]
    return None


def clicks(form: FormState) -> Clicks | None:
    """How a click on a grid plays: the action is a row and a column (or y and x), or a column alone."""
    played = _played(form)
    if not played or any(f.kind != FieldKind.INTEGER for f in played):
        return None
    names = {f.name.lower(): f.name for f in played}
    columns = [names[n] for n in COLUMN_NAMES if n in names]
    rows = [names[n] for n in ROW_NAMES if n in names]
    if len(played) == 1 and len(columns) == 1:
        return Clicks(columns[0])
    if len(played) == 2 and len(columns) == 1 and len(rows) == 1:
        return Clicks(columns[0], rows[0])
    return None


def board_hints(form: FormState | None, info: Interface) -> Hints:
    """How the boards of this environment are drawn: clickable when the form's action plays them, with the
    observation schema's field descriptions for their legends."""
    observation = (info.schema or {}).get("observation")
    properties = observation.get("properties") if isinstance(observation, dict) else None
    descriptions = {
        name: str(prop["description"])
        for name, prop in (properties or {}).items()
        if isinstance(prop, dict) and isinstance(prop.get("description"), str)
    }
    return Hints(clicks(form) if form is not None else None, descriptions)


def controls_html(form: FormState) -> str:
    """The buttons of a one-choice action, or what a click on the board does; empty when neither applies."""
    choice = choice_field(form)
    if choice is not None:
        buttons = "".join(_choice_button(choice, value) for value in choice.choices)
        keys = " or use the arrow keys" if any(str(v).lower() in ARROW_KEYS for v in choice.choices) else ""
        return (
            f'<div class="direct-controls" role="group" aria-label="{html.escape(choice.name)}">{buttons}</div>'
            f'<p class="direct-hint">Press a button{keys}: each one sends the step.</p>'
        )
    found = clicks(form)
    if found is None:
        return ""
    if found.row is None:
        return '<p class="direct-hint">Click a column of the board (or its ▼ button) to play it.</p>'
    return '<p class="direct-hint">Click a cell of the board to play it (Tab and Enter from the keyboard).</p>'


def _choice_button(choice: FormField, value: Any) -> str:
    key = ARROW_KEYS.get(str(value).lower())
    label = f"{ARROWS[key]} {value}" if key else str(value)
    shortcut = f' data-key="{key}" aria-keyshortcuts="{key}"' if key else ""
    action = html.escape(json.dumps({choice.name: value}), quote=True)
    return f'<button type="button" class="direct" data-action="{action}"{shortcut}>{html.escape(label)}</button>'


def direct_action(form: FormState, arguments: Any) -> dict[str, Any] | None:
    """The form's action filled with a control's arguments; None when they are not the form's fields or do not
    validate (a page can send anything)."""
    if not isinstance(arguments, dict) or not set(arguments) <= {f.name for f in visible(form.fields)}:
        return None
    filled, errors = action_from_form(form.fields, [arguments.get(f.name) for f in visible(form.fields)])
    return None if errors else form.action(filled)
