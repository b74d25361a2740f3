import base64
import json

import pytest

from protocol.tools import Tool
from rollout.harness import (
    MAX_REPLY_CHARS,
    Brief,
    InvalidReply,
    observation_content,
    read_action,
    read_tool_call,
    system_prompt,
)

GUESS = {
    "type": "object",
    "properties": {"guess": {"type": "string"}, "metadata": {"type": "object"}},
    "required": ["guess"],
    "additionalProperties": False,
}
BRIEF = Brief("wordle", action_schema=GUESS)
README = """---
title: Wordle
---
# Wordle

Intro that an agent does not need.

## What the agent sees

A board of colored letters.

## Actions

`{"guess": "crane"}`

## Development

How to run the tests.
"""


def test_the_system_prompt_has_the_readme_parts_an_agent_needs_and_the_schema() -> None:
    prompt = system_prompt(Brief("wordle", README, GUESS))
    assert "A board of colored letters." in prompt and '{"guess": "crane"}' in prompt
    assert "Intro that an agent" not in prompt and "How to run the tests" not in prompt
    assert json.dumps(GUESS) in prompt
    assert system_prompt(Brief("wordle", README, GUESS, prompt="Be brief.")) == "Be brief."


def test_tool_environments_are_told_to_call_tools() -> None:
    brief = Brief("toolbox", "", {"type": "object", "properties": {"metadata": {}}}, (Tool("add", "adds"),))
    assert brief.uses_tools
    assert "calling exactly one of the tools" in system_prompt(brief)
    assert brief.chat_tools()[0]["function"]["name"] == "add"


@pytest.mark.parametrize(
    "reply",
    [
        'Let me think.\n```json\n{"guess": "crane"}\n```',
        '{"guess": "crane"}',
        'I will guess {"guess": "crane"} now',
        '```\n{"guess": "slate"}\n```\nActually: ```json\n{"guess": "crane"}\n```',  # the last block wins
        '{"guess": "crane"} and not {"word": "slate"}',  # the last one does not fit the schema
        '{"guess": "a } inside a string"}'.replace("a } inside a string", "crane"),
    ],
)
def test_an_action_is_read_fenced_or_bare(reply: str) -> None:
    assert read_action(reply, BRIEF) == {"guess": "crane"}


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("", "empty"),
        ("I do not know.", "no JSON object"),
        ('```json\n{"guess": crane}\n```', "does not parse"),
        ('{"word": "crane"}', "does not fit the schema"),
        ('{"guess": 5}', "guess: 5 is not of type 'string'"),
        ("x" * (MAX_REPLY_CHARS + 1), "characters"),
    ],
)
def test_a_reply_without_a_valid_action_says_why(reply: str, problem: str) -> None:
    with pytest.raises(InvalidReply, match=problem):
        read_action(reply, BRIEF)


def test_tool_calls_are_checked_against_the_tools() -> None:
    add = Tool("add", "", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    brief = Brief("toolbox", tools=(add,))
    assert read_tool_call("add", '{"a": 1}', brief) == {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1}}
    with pytest.raises(InvalidReply, match="there is no tool 'sub'; the tools are add"):
        read_tool_call("sub", "{}", brief)
    with pytest.raises(InvalidReply, match="not JSON"):
        read_tool_call("add", "{a: 1", brief)
    with pytest.raises(InvalidReply, match="'a' is a required property"):
        read_tool_call("add", "{}", brief)


def test_images_go_as_image_parts_and_the_text_notes_them() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
    parts = observation_content({"grid": png, "moves": 3}, reward=0.5)
    assert parts[0]["type"] == "text"
    assert parts[0]["text"].startswith("Reward 0.5. Observation: ")
    assert '"grid": "<image 1, attached>"' in parts[0]["text"] and '"moves": 3' in parts[0]["text"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
