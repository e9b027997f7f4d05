"""Chat templates that take tools, one per native tool-call format, written for the tests from
the formats' public descriptions (each shows its model the call shape the way the real
template does, with the marker Hearth detects the format by), and one reply per format.

Small on purpose: they render the tools and the turns, not every feature of the originals.
"""

from __future__ import annotations

from server.core.templates.tool_formats import ToolFormat

HERMES = (
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>{% for t in tools %}{{ t | tojson }}"
    "{% endfor %}</tools>\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

LLAMA3 = (
    "{{ bos_token }}{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    "Environment: ipython\nGiven the following functions, please respond with a JSON for a "
    'function call. Respond in the format {"name": function name, "parameters": dictionary of '
    "argument name and its value}. Do not use variables.\n\n{% for t in tools %}"
    "{{ t | tojson }}\n\n{% endfor %}<|eot_id|>{%- endif %}"
    "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{%- if m.tool_calls %}<|python_tag|>{{ m.tool_calls[0].function | tojson }}<|eom_id|>"
    "{%- else %}{{ m.content }}<|eot_id|>{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    "{%- endif %}"
)

MISTRAL = (
    "{{ bos_token }}{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]"
    "{%- endif %}{%- for m in messages %}{%- if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
    "{%- elif m.tool_calls %}{%- for c in m.tool_calls %}[TOOL_CALLS]{{ c.function.name }}"
    "[ARGS]{{ c.function.arguments | tojson }}{%- endfor %}{{ eos_token }}"
    "{%- else %}{{ m.content }}{{ eos_token }}{%- endif %}{%- endfor %}"
)

QWEN3_CODER = (
    "{%- if tools %}<|im_start|>system\n# Tools\n\nYou have access to the following functions:"
    "\n\n<tools>{% for t in tools %}\n<function>\n<name>{{ t.function.name }}</name>\n"
    "<parameters>{{ t.function.parameters | tojson }}</parameters>\n</function>{% endfor %}"
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
    "\nvalue_1\n</parameter>\n</function>\n</tool_call><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

HARMONY = (
    "<|start|>system<|message|>You are a helpful assistant.\n\n# Valid channels: analysis, "
    "commentary, final. Channel must be included for every message.\nCalls to these tools must "
    "go to the commentary channel: 'functions'.<|end|>{%- if tools %}<|start|>developer"
    "<|message|># Tools\n\n## functions\n\nnamespace functions {\n{% for t in tools %}"
    "type {{ t.function.name }} = (_: {{ t.function.parameters | tojson }}) => any;\n"
    "{% endfor %}} // namespace functions<|end|>{%- endif %}"
    "{%- for m in messages %}{%- if m.role == 'assistant' %}<|start|>assistant<|channel|>final"
    "<|message|>{{ m.content }}<|end|>{%- else %}<|start|>{{ m.role }}<|message|>"
    "{{ m.content }}<|end|>{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|start|>assistant{%- endif %}"
)

TEMPLATES = {
    ToolFormat.HERMES: HERMES,
    ToolFormat.LLAMA3: LLAMA3,
    ToolFormat.MISTRAL: MISTRAL,
    ToolFormat.QWEN3_CODER: QWEN3_CODER,
    ToolFormat.HARMONY: HARMONY,
}

# A reply calling get_weather(city="Oslo", days=3) in each format, after a little text where the
# format allows text before a call (Llama 3.x's calls are the whole reply).
REPLIES = {
    ToolFormat.HERMES: "Checking. <tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}\n</tool_call>',
    ToolFormat.LLAMA3: '{"name": "get_weather", "parameters": {"city": "Oslo", "days": 3}}',
    ToolFormat.MISTRAL: 'Checking. [TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "days": 3}',
    ToolFormat.QWEN3_CODER: "Checking. <tool_call>\n<function=get_weather>\n"
    "<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
    "</tool_call>",
    ToolFormat.HARMONY: "<|channel|>analysis<|message|>The user wants the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city": "Oslo", "days": 3}<|call|>',
}
# The text each reply shows besides its call, when the thought is left in the text.
REPLY_TEXT = {
    ToolFormat.HERMES: "Checking. ",
    ToolFormat.LLAMA3: "",
    ToolFormat.MISTRAL: "Checking. ",
    ToolFormat.QWEN3_CODER: "Checking. ",
    ToolFormat.HARMONY: "<|channel|>analysis<|message|>The user wants the weather.<|end|>",
}

WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
