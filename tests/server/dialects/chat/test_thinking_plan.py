"""What a request's thinking becomes (server/dialects/chat/thinking.py): the budget from the
request, its effort or the server, the template's switches, whether the reply is split; and a
reply's thought tokens counted where their text went."""

from __future__ import annotations

from server.core.templates.chat import ChatTemplate
from server.core.text.reasoning import HARMONY, ThinkingSyntax
from server.core.types import TokenEvent
from server.dialects.chat.thinking import (
    ServerThinking,
    ThinkingAsk,
    ThoughtReader,
    effort_budget,
    plan_thinking,
    server_thinking,
)

QWEN = ChatTemplate("{{ messages }}{% if enable_thinking %}<think>{% endif %}", "qwen3")
CHATML = ChatTemplate("<|im_start|>{{ messages }}", "llama")
HARMONY_TEMPLATE = ChatTemplate("<|start|><|channel|>final<|message|>{{ messages }}", "gpt-oss")


def test_effort_budgets_are_koboldcpp_s() -> None:
    assert [effort_budget(e, 200) for e in ("none", "minimal", "low", "medium")] == [0, 20, 50, 100]
    assert effort_budget("high", 200) is None and effort_budget(None, 200) is None


def test_the_budget_the_request_the_effort_then_the_server() -> None:
    server = ServerThinking(budget=64)
    assert plan_thinking(QWEN, ThinkingAsk(budget=10), server, 100).budget == 10
    assert plan_thinking(QWEN, ThinkingAsk(effort="low"), server, 100).budget == 25
    assert plan_thinking(QWEN, ThinkingAsk(), server, 100).budget == 64
    assert server_thinking("auto", -1) == ServerThinking("auto", None)


def test_switches_reach_the_template() -> None:
    server = ServerThinking()
    off = plan_thinking(QWEN, ThinkingAsk(enabled=False), server, 100)
    assert (off.budget, off.template_kwargs) == (0, {"enable_thinking": False})
    on = plan_thinking(QWEN, ThinkingAsk(enabled=True, effort="high"), server, 100)
    assert on.template_kwargs == {"enable_thinking": True, "reasoning_effort": "high"}
    assert on.template.kwargs == on.template_kwargs  # the template is told
    none = plan_thinking(QWEN, ThinkingAsk(effort="none"), server, 100)
    assert none.template_kwargs == {"enable_thinking": False}
    # --reasoning-budget 0 means no thinking, unless the request turns it on
    no_thinking = ServerThinking(budget=0)
    assert plan_thinking(QWEN, ThinkingAsk(), no_thinking, 100).budget == 0
    assert plan_thinking(QWEN, ThinkingAsk(enabled=True), no_thinking, 100).budget is None


def test_the_split() -> None:
    server, none = ServerThinking(), ServerThinking("none")
    assert plan_thinking(QWEN, ThinkingAsk(), server, 9).syntax == ThinkingSyntax()
    assert plan_thinking(QWEN, ThinkingAsk(), none, 9).syntax is None
    assert plan_thinking(QWEN, ThinkingAsk(format="auto"), none, 9).syntax == ThinkingSyntax()
    assert plan_thinking(HARMONY_TEMPLATE, ThinkingAsk(), server, 9).syntax == HARMONY
    # a model that writes <think> unasked is split too; Ollama's rule leaves it be
    assert plan_thinking(CHATML, ThinkingAsk(), server, 9).syntax == ThinkingSyntax()
    ollama = ThinkingAsk(split_only_thinking_templates=True)
    assert plan_thinking(CHATML, ollama, server, 9).syntax is None
    assert plan_thinking(QWEN, ollama, server, 9).syntax == ThinkingSyntax()


def test_thought_tokens_count_where_their_text_went() -> None:
    reader = ThoughtReader(ThinkingSyntax(), start_inside=False)
    for text, tokens in [("<", 1), ("think>", 2), ("a b", 2), ("</think>", 3), ("Yes", 1)]:
        reader.read(TokenEvent(text, tuple(range(tokens))))
    reader.finish()
    assert (reader.reasoning, reader.reasoning_tokens) == ("a b", 8)  # the tags' tokens too
    plain = ThoughtReader(ThinkingSyntax(), start_inside=False)
    for text in ("<", "b>", "old"):  # it looked like a tag, then was not: the answer's
        plain.read(TokenEvent(text, (1,)))
    assert plain.reasoning_tokens == 0


def test_the_requests_own_template_kwargs_win() -> None:
    """A request's chat_template_kwargs are its last word (llama-server): an explicit
    enable_thinking is neither overridden by its effort nor by a server without thinking."""
    on = ThinkingAsk(effort="none", template_kwargs={"enable_thinking": True})
    plan = plan_thinking(QWEN, on, ServerThinking(budget=0), 100)
    assert plan.template_kwargs["enable_thinking"] is True and plan.budget != 0
    off = plan_thinking(
        QWEN, ThinkingAsk(template_kwargs={"enable_thinking": False}), ServerThinking(), 100
    )
    assert (off.budget, off.template_kwargs["enable_thinking"]) == (0, False)
