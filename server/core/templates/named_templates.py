"""Chat templates by name, for `--chat-template NAME` (llama-server's built-in names).

Each is Jinja written here from the format's public description (the model makers' cards and
llama.cpp's list of built-in formats), rendered like a model's own template: `messages`,
`add_generation_prompt`, `bos_token`. Tool calls an assistant made earlier are written as the
JSON object Hearth's grammar-bound calls use (`TEXT` below), and tool results as that turn's
text, since none of these formats has a tool syntax of its own that Hearth parses.
"""

from __future__ import annotations

# A message's text: its content, then any tool calls it made, one JSON object per line.
TEXT = (
    "{%- macro text(m) -%}{{ m['content'] }}"
    "{%- if m['tool_calls'] is defined -%}{%- for c in m['tool_calls'] -%}"
    "{{ '\\n' if (m['content'] or not loop.first) else '' }}"
    "{{ {'name': c['function']['name'], 'arguments': c['function']['arguments']} | tojson }}"
    "{%- endfor -%}{%- endif -%}{%- endmacro -%}"
)


def _each(turn: str, generation: str) -> str:
    """Every message as `turn` (Jinja with `m` and `role`), then `generation` if asked."""
    return (
        TEXT + "{%- for m in messages -%}{%- set role = m['role'] -%}" + turn + "{%- endfor -%}"
        "{%- if add_generation_prompt -%}" + generation + "{%- endif -%}"
    )


def _system_folded(turn: str, generation: str, separator: str = "\\n\\n") -> str:
    """As `_each`, for formats without a system role: the system text goes in front of the
    first user message (`first` is that text, or '')."""
    return (
        TEXT + "{%- set ns = namespace(system='', pending='') -%}"
        "{%- for m in messages if m['role'] == 'system' -%}"
        "{%- set ns.system = ns.system + (m['content'] | trim) + '" + separator + "' -%}"
        "{%- endfor -%}{%- set ns.pending = ns.system -%}"
        "{%- for m in messages if m['role'] != 'system' -%}{%- set role = m['role'] -%}"
        "{%- set first = ns.pending if role != 'assistant' else '' -%}"
        "{%- if role != 'assistant' -%}{%- set ns.pending = '' -%}{%- endif -%}"
        + turn
        + "{%- endfor -%}{%- if add_generation_prompt -%}"
        + generation
        + "{%- endif -%}"
    )


def _mistral(space_before_inst: str, space_after_inst: str) -> str:
    """Mistral's [INST] formats (v1, v3, v3-tekken): the system text opens the next user turn."""
    return (
        TEXT + "{%- set ns = namespace(open=false) -%}"
        "{%- for m in messages -%}"
        "{%- if not ns.open -%}{{ '" + space_before_inst + "[INST]" + space_after_inst + "' }}"
        "{%- set ns.open = true -%}{%- endif -%}"
        "{%- if m['role'] == 'system' -%}{{ m['content'] + '\\n\\n' }}"
        "{%- elif m['role'] == 'assistant' -%}"
        "{{ '" + space_after_inst + "' + text(m) | trim + '</s>' }}{%- set ns.open = false -%}"
        "{%- else -%}{{ text(m) + '" + space_before_inst + "[/INST]' }}{%- endif -%}"
        "{%- endfor -%}"
    )


def _llama2(system_open: str, system_close: str) -> str:
    """Llama 2's [INST] format; plain `llama2` has no system markers (llama.cpp's names)."""
    return (
        TEXT + "{{ '[INST] ' }}{%- set ns = namespace(open=true) -%}"
        "{%- for m in messages -%}"
        "{%- if not ns.open -%}{{ '[INST] ' }}{%- set ns.open = true -%}{%- endif -%}"
        "{%- if m['role'] == 'system' -%}"
        "{{ '" + system_open + "' + m['content'] + '" + system_close + "' }}"
        "{%- elif m['role'] == 'assistant' -%}{{ text(m) + '</s>' }}{%- set ns.open = false -%}"
        "{%- else -%}{{ text(m) + ' [/INST]' }}{%- endif -%}{%- endfor -%}"
    )


def _mistral_v7(space: str) -> str:
    return _each(
        "{%- if role == 'system' -%}{{ '[SYSTEM_PROMPT]" + space + "' + m['content'] + "
        "'[/SYSTEM_PROMPT]' }}"
        "{%- elif role == 'assistant' -%}{{ '" + space + "' + text(m) + '</s>' }}"
        "{%- else -%}{{ '[INST]" + space + "' + text(m) + '[/INST]' }}{%- endif -%}",
        "",
    )


# DeepSeek's markers are written with full-width bars and a "lower one eighth block" for spaces.
_DS_USER = "<\uff5cUser\uff5c>"
_DS_ASSISTANT = "<\uff5cAssistant\uff5c>"
_DS_END = "<\uff5cend\u2581of\u2581sentence\uff5c>"

_CHATML = _each(
    "{{ '<|im_start|>' + role + '\\n' + text(m) + '<|im_end|>\\n' }}",
    "{{ '<|im_start|>assistant\\n' }}",
)

NAMED_TEMPLATES: dict[str, str] = {
    "chatml": _CHATML,
    "llama2": _llama2("", "\\n"),
    "llama2-sys": _llama2("<<SYS>>\\n", "\\n<</SYS>>\\n\\n"),
    "llama3": _each(
        "{{ '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' + text(m) | trim "
        "+ '<|eot_id|>' }}",
        "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}",
    ),
    "llama4": _each(
        "{{ '<|header_start|>' + role + '<|header_end|>\\n\\n' + text(m) | trim + '<|eot|>' }}",
        "{{ '<|header_start|>assistant<|header_end|>\\n\\n' }}",
    ),
    "gemma": _system_folded(
        "{{ '<start_of_turn>' + ('model' if role == 'assistant' else 'user') + '\\n' + first "
        "+ text(m) | trim + '<end_of_turn>\\n' }}",
        "{{ '<start_of_turn>model\\n' }}",
    ),
    "mistral-v1": _mistral(" ", " "),
    "mistral-v3": _mistral("", " "),
    "mistral-v3-tekken": _mistral("", ""),
    "mistral-v7": _mistral_v7(" "),
    "mistral-v7-tekken": _mistral_v7(""),
    "phi3": _each(
        "{{ '<|' + role + '|>\\n' + text(m) + '<|end|>\\n' }}", "{{ '<|assistant|>\\n' }}"
    ),
    "phi4": _each(
        "{{ '<|im_start|>' + role + '<|im_sep|>' + text(m) + '<|im_end|>' }}",
        "{{ '<|im_start|>assistant<|im_sep|>' }}",
    ),
    "falcon3": _each("{{ '<|' + role + '|>\\n' + text(m) + '\\n' }}", "{{ '<|assistant|>\\n' }}"),
    "zephyr": _each(
        "{{ '<|' + role + '|>\\n' + text(m) + '<|endoftext|>\\n' }}", "{{ '<|assistant|>\\n' }}"
    ),
    "vicuna": _each(
        "{%- if role == 'system' -%}{{ m['content'] + '\\n\\n' }}"
        "{%- elif role == 'assistant' -%}{{ 'ASSISTANT: ' + text(m) + '</s>\\n' }}"
        "{%- else -%}{{ 'USER: ' + text(m) + '\\n' }}{%- endif -%}",
        "{{ 'ASSISTANT:' }}",
    ),
    "openchat": _each(
        "{%- if role == 'system' -%}{{ m['content'] + '<|end_of_turn|>' }}"
        "{%- else -%}{{ 'GPT4 Correct ' + ('Assistant' if role == 'assistant' else 'User') "
        "+ ': ' + text(m) + '<|end_of_turn|>' }}{%- endif -%}",
        "{{ 'GPT4 Correct Assistant:' }}",
    ),
    "deepseek": _each(
        "{%- if role == 'system' -%}{{ m['content'] }}"
        "{%- elif role == 'assistant' -%}{{ '### Response:\\n' + text(m) + '\\n<|EOT|>\\n' }}"
        "{%- else -%}{{ '### Instruction:\\n' + text(m) + '\\n' }}{%- endif -%}",
        "{{ '### Response:\\n' }}",
    ),
    "deepseek2": _each(
        "{%- if role == 'system' -%}{{ m['content'] + '\\n\\n' }}"
        "{%- elif role == 'assistant' -%}{{ 'Assistant: ' + text(m) + '" + _DS_END + "' }}"
        "{%- else -%}{{ 'User: ' + text(m) + '\\n\\n' }}{%- endif -%}",
        "{{ 'Assistant:' }}",
    ),
    "deepseek3": _each(
        "{%- if role == 'system' -%}{{ m['content'] + '\\n\\n' }}"
        "{%- elif role == 'assistant' -%}"
        "{{ '" + _DS_ASSISTANT + "' + text(m) + '" + _DS_END + "' }}"
        "{%- else -%}{{ '" + _DS_USER + "' + text(m) }}{%- endif -%}",
        "{{ '" + _DS_ASSISTANT + "' }}",
    ),
    "command-r": _each(
        "{{ '<|START_OF_TURN_TOKEN|><|' + {'system': 'SYSTEM', 'assistant': 'CHATBOT'}"
        ".get(role, 'USER') + '_TOKEN|>' + text(m) | trim + '<|END_OF_TURN_TOKEN|>' }}",
        "{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}",
    ),
    "granite": _each(
        "{{ '<|start_of_role|>' + role + '<|end_of_role|>' + text(m) + '<|end_of_text|>\\n' }}",
        "{{ '<|start_of_role|>assistant<|end_of_role|>' }}",
    ),
    # Harmony: an assistant's earlier answer is its `final` channel (its thoughts are not
    # shown again); the reply opens `<|start|>assistant` and the model names its channel.
    "gpt-oss": _each(
        "{{ '<|start|>' + role + ('<|channel|>final' if role == 'assistant' else '') "
        "+ '<|message|>' + text(m) + '<|end|>' }}",
        "{{ '<|start|>assistant' }}",
    ),
}


def named_template(name: str) -> str | None:
    """The Jinja of the built-in template called `name` (any case), or None."""
    return NAMED_TEMPLATES.get(name.strip().lower())
