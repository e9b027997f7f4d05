"""Media parts of a message, in every dialect: each image or sound becomes MEDIA_MARKER at its
place in the message's text and a checked MediaInput beside it (server/dialects/media/media.py
checks the bytes); the engine's projector reads them there (server/core/llama/loading/media.py).

As llama-server does, a media part stands between the text parts as a part of its own: the
parts are joined with a blank line, the marker among them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from server.core.templates.chat import ChatMessage
from server.core.types import MEDIA_MARKER, MediaInput
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media.media import check_media_count

# Reads one part: its media item, or None when the part is not media (text, tool use…).
PartReader = Callable[[object, str], MediaInput | None]


def text_and_media(
    content: str | Sequence[object] | None,
    read: PartReader,
    where: str,
    kinds: Collection[str] = ("text",),
) -> tuple[str, tuple[MediaInput, ...]]:
    """A message's text with a marker for each media part, and the media in order. `where`
    names the message in errors ("messages[2]"); each part adds its index."""
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    media: list[MediaInput] = []
    for index, part in enumerate(content):
        item = read(part, f"{where}.content[{index}]")
        text = getattr(part, "text", None)
        if item is not None:
            media.append(item)
            texts.append(MEDIA_MARKER)
        elif getattr(part, "type", "text") in kinds and text:
            texts.append(str(text))
    return "\n\n".join(texts), tuple(media)


def media_in_turns(
    messages: Sequence[ChatMessage], prompt: str, dialect: Dialect
) -> tuple[MediaInput, ...]:
    """The request's media: its messages', in turn; a 400 beyond the cap, or when the rendered
    prompt does not hold a marker for each (a template that drops a message's content)."""
    media = tuple(item for message in messages for item in message.media)
    if not media:
        return ()
    check_media_count(media, dialect)
    if prompt.count(MEDIA_MARKER) != len(media):
        raise APIError(
            400,
            "the chat template left out a message that carries an image (or a sound): "
            "put it in a user message",
            dialect=dialect,
        )
    return media
