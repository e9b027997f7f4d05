"""A chat plan's tools called in the model's own format: the parser that reads its reply live.

The one place that maps a `ToolFormat` (tool_formats.py) to its parser, so a dialect only
carries `LiveTools` from planning to reading (server/dialects/chat/plans.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.core.templates.chat import ToolSpec
from server.core.templates.tool_formats import ToolFormat
from server.core.tool_calls.tool_formats_harmony import HarmonyParser
from server.core.tool_calls.tool_formats_json import HermesParser
from server.core.tool_calls.tool_formats_llama3 import Llama3Parser
from server.core.tool_calls.tool_formats_mistral import MistralParser
from server.core.tool_calls.tool_formats_xml import Qwen3CoderParser
from server.core.tool_calls.tool_stream import ToolCallStream


@dataclass(frozen=True, slots=True)
class LiveTools:
    """The tools a reply may call in `format`, the model's own (their schemas type
    Qwen3-Coder's parameter values)."""

    format: ToolFormat
    tools: tuple[ToolSpec, ...] = ()

    def parser(self) -> ToolCallStream:
        """A fresh parser for one reply."""
        match self.format:
            case ToolFormat.HERMES:
                return HermesParser()
            case ToolFormat.LLAMA3:
                return Llama3Parser()
            case ToolFormat.MISTRAL:
                return MistralParser()
            case ToolFormat.QWEN3_CODER:
                return Qwen3CoderParser(self.tools)
            case ToolFormat.HARMONY:
                return HarmonyParser()
