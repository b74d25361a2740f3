"""A tiny Qwen3-shaped model and tokenizer, built on the spot: GRPO through an envhub URL on a CPU, with no download.

TRL parses tool calls only for chat templates it knows byte for byte, and needs `<tool_call>`, `</tool_call>` and
the end-of-turn mark as single tokens: the tokenizer gets TRL's own Qwen3 template and Qwen's special tokens, and a
byte-level BPE trained on a few lines of text. A random model never calls a tool, so `warm_up` teaches it, by a
short supervised loop, to answer the exact prompt TRL renders with one given tool call: GRPO then steps the
environment from its first batch. Run in the trainer's virtualenv (examples/requirements-trl.txt).
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
_CORPUS = [
    "You may call one or more functions to assist with the user query.",
    "system user assistant tool function name arguments description parameters properties required type "
    'string integer number boolean object array null true false "enum" "items" "default" "title"',
    "Play the game with the tools you have. The episode is over. reset step state observation reward done",
    "0123456789 {}[]():;,.-_+*/=<>!?'\"\\# \n\t up down left right north south east west grid maze position",
]


def _tokenizer(vocab_size: int) -> Any:
    from importlib.resources import files

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet)
    bpe.train_from_iterator(_CORPUS * 8, trainer=trainer)
    template = files("trl").joinpath("chat_templates", "qwen3.jinja").read_text()  # the one TRL recognises
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:],
        chat_template=template,
    )


def build(folder: Path, *, seed: int = 0) -> Path:
    """Save a model of about 100k parameters and its tokenizer into `folder`, loadable by name as any model."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    tokenizer = _tokenizer(vocab_size=1024)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    """An assistant turn calling one tool, as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call><|im_end|>"


def warm_up(
    folder: Path,
    prompt: list[dict[str, str]],
    tools: Sequence[Any],
    answer: str,
    *,
    steps: int = 300,
    seed: int = 0,
) -> Path:
    """Teach the model in `folder` to answer `prompt` (rendered with `tools` as TRL renders it) with `answer`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    rendered = tokenizer.apply_chat_template(
        prompt, tools=list(tools), add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    prefix = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    target = tokenizer(answer, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prefix + target])
    labels = torch.tensor([[-100] * len(prefix) + target])  # learn the answer, not the prompt
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(folder)
    return folder
