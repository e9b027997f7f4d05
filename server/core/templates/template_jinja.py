"""Compiling and rendering a chat template's Jinja, with every failure a ChatTemplateError.

A chat template is code from a model file, a user's file or a request's choice of variables:
whatever it does wrong (a syntax error, `raise_exception`, a type error on a field it did not
expect) is that template's problem, said in one sentence naming where the template came from,
never an internal error of the server. The environment is the sandbox Hugging Face's own
templates are written for (`tojson`, `raise_exception`, `strftime_now`, loop controls).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox


class ChatTemplateError(ValueError):
    """The conversation cannot be rendered (bad roles, or the template refused it or failed),
    or a template does not compile."""


class _TemplateRaised(ChatTemplateError):
    """The template's own `raise_exception(message)`."""


def compile_template(source: str) -> jinja2.Template:
    """The compiled template; ChatTemplateError (with the line) when it does not compile."""
    environment = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        loader=jinja2.BaseLoader(),
        extensions=[jinja2.ext.loopcontrols],  # {% break %}: some models' templates use it
    )
    environment.globals["raise_exception"] = _raise_template_error
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    environment.filters["tojson"] = _tojson
    try:
        return environment.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ChatTemplateError(f"line {exc.lineno}: {exc.message}") from None
    except Exception as exc:  # the compiler's own errors on odd input, said the same way
        raise ChatTemplateError(_said(exc)) from None


def default_variables(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """What llama.cpp gives every template besides the conversation, so that a template written
    for llama-server renders the same here: today's date in the two spellings Llama 3.x's and
    FireFunction's templates read, and `enable_thinking` on (templates patched for llama.cpp
    test `{% if not enable_thinking %}` and would otherwise close every thought). FireFunction's
    template also reads its tools as one JSON text, `functions`."""
    today = datetime.now()
    return {
        "date_string": today.strftime("%d %b %Y"),
        "datetime": today.strftime("%b %d %Y"),
        "enable_thinking": True,
        "functions": json.dumps(tools, indent=2) if tools else "",
    }


def render_template(template: jinja2.Template, origin: str, context: Mapping[str, Any]) -> str:
    """`template` rendered with `context`; ChatTemplateError naming `origin` on any failure."""
    try:
        return template.render(**context)
    except _TemplateRaised as exc:
        raise ChatTemplateError(f"the chat template ({origin}) refused this: {exc}") from None
    except Exception as exc:  # anything a template can do wrong is the template's, a 400
        raise ChatTemplateError(f"the chat template ({origin}) failed: {_said(exc)}") from None


def _said(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _raise_template_error(message: str) -> None:
    raise _TemplateRaised(message)


def _tojson(
    value: Any,
    indent: int | None = None,
    ensure_ascii: bool = False,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, indent=indent, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys
    )
