"""KoboldAI Lite's server features, as KoboldCpp serves them: the shared multiplayer story
(`--multiplayer`), save slots on the server (`--savedatafile`), the story every page load
starts from (`--preloadstory`) and web search (`--websearch`).

`LiteFeatures` holds what the settings turned on, built once at start (`lite_features`, which
reads the preloaded story and opens the save slots, so a file that cannot be used stops the
start with its reason) and kept on `app.state.lite`. The routes answer KoboldCpp's bodies,
field for field. Differences on purpose: a refusal comes with a 4xx status and the reason in
KoboldCpp's error shape (`detail`) beside KoboldCpp's own body for it, where KoboldCpp answers
some with 200 (a feature that is off, an empty slot); a multiplayer write that names the turn
it was based on is refused (409) once the story moved on
(server/dialects/kobold/shared_story.py); save slots live in SQLite
(server/dialects/kobold/save_slots.py). With a password, every POST here needs the key, as in
KoboldCpp; the preloaded story (a GET, which Lite asks for before it knows any key) does not.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict
from typing_extensions import TypedDict

from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, error_body
from server.dialects.kobold.save_slots import SaveDataError, SaveRefused, SaveSlots
from server.dialects.kobold.shared_story import SharedStory, StaleStory, StoryRefused, Turn
from server.dialects.kobold.websearch import SearchFailed, WebResult, WebSearch
from server.dialects.pipeline.openapi import json_body
from server.dialects.pipeline.routing import Served, json_route
from server.settings.config import HearthSettings

logger = logging.getLogger("hearth")
router = APIRouter(tags=["KoboldAI Lite"])
KOBOLD = Dialect.KOBOLD
MAX_PRELOAD_BYTES = 64 * 1024 * 1024
NOT_MULTIPLAYER = "Multiplayer not enabled!"  # KoboldCpp's words, here and below
NOT_SAVEDATA = "SaveDataFile not enabled!"
NOT_WEBSEARCH = "WebSearch not enabled!"
# Lite sends ids and titles as text, but a number is taken as its text.
Text = Annotated[str, BeforeValidator(lambda value: "" if value is None else str(value))]


class LiteSetupError(Exception):
    """A Lite feature's file cannot be used: the console's line."""


@dataclass(frozen=True, slots=True)
class LiteFeatures:
    """What the settings turned on (None: off)."""

    shared_story: SharedStory | None = None
    save_slots: SaveSlots | None = None
    preloaded_story: bytes | None = None  # the JSON Lite receives
    web_search: WebSearch | None = None


def lite_features(settings: HearthSettings, web_search: WebSearch | None = None) -> LiteFeatures:
    """The features the settings ask for; `web_search` replaces the default search (tests).
    LiteSetupError when the preloaded story or the save data file cannot be used."""
    story = preloaded_story(settings.preloadstory)  # first: reading it creates nothing
    path = Path(settings.savedatafile).expanduser() if settings.savedatafile else None
    try:
        slots = SaveSlots(path) if path is not None else None
    except SaveDataError as exc:
        raise LiteSetupError(f"--savedatafile {exc}") from None
    return LiteFeatures(
        shared_story=SharedStory() if settings.multiplayer else None,
        save_slots=slots,
        preloaded_story=story,
        web_search=(web_search or WebSearch()) if settings.websearch else None,
    )


def preloaded_story(value: str | dict[str, Any] | None) -> bytes | None:
    """The story as Lite receives it: a file's JSON as it is, or the JSON of a story given
    inline (a .kcppt embeds it as an object, the command line may give it as text)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return json.dumps(value).encode()
    if value.lstrip().startswith("{"):
        raw, source = value.encode(), "--preloadstory (inline JSON)"
    else:
        path = Path(value).expanduser()
        source = f"--preloadstory {path}"
        try:
            with path.open("rb") as file:
                raw = file.read(MAX_PRELOAD_BYTES + 1)
        except OSError as exc:
            raise LiteSetupError(f"{source}: {exc.strerror or exc}") from None
        if len(raw) > MAX_PRELOAD_BYTES:
            raise LiteSetupError(f"{source}: larger than {MAX_PRELOAD_BYTES:,} bytes")
    try:
        json.loads(raw)
    except ValueError as exc:
        raise LiteSetupError(f"{source}: not a JSON story ({exc})") from None
    return raw


def _features(request: Request) -> LiteFeatures:
    features: LiteFeatures = request.app.state.lite
    return features


def _refused(
    status: int, message: str, kind: ErrorKind = ErrorKind.BAD_INPUT, **koboldcpp: Any
) -> APIError:
    """A refusal: KoboldCpp's body for it (`koboldcpp`), and the reason in the dialect's error
    shape beside, which every Hearth client reads."""
    return APIError(status, message, kind, body=koboldcpp | dict(error_body(KOBOLD, message, kind)))


# -- the preloaded story ---------------------------------------------------------------------


@router.get("/api/extra/preloadstory")
async def preload_story(request: Request) -> Response:
    """The story a Lite page starts from; `{}` when none is set (KoboldCpp's answer)."""
    story = _features(request).preloaded_story
    return Response(story if story is not None else b"{}", media_type="application/json")


# -- multiplayer -----------------------------------------------------------------------------


class MultiplayerStatusRequest(BaseModel):
    """POST /api/extra/multiplayer/status: who asks, and whether they are busy writing."""

    model_config = ConfigDict(extra="allow")

    sender: Text = ""
    senderbusy: bool = False


class MultiplayerStoryRequest(BaseModel):
    """POST /api/extra/multiplayer/setstory: the whole story, as Lite saves it."""

    model_config = ConfigDict(extra="allow")

    data: Text = ""
    data_format: Text = ""
    sender: Text = ""
    full_update: bool = False
    # Hearth's: the turn the story was based on; a write based on an older one is refused.
    turn_major: int | None = None
    turn_minor: int | None = None


class MultiplayerStatus(TypedDict):
    turn_major: int
    turn_minor: int
    idle: bool
    data_format: str


class MultiplayerWritten(MultiplayerStatus):
    success: bool


def _generating(served: Served) -> bool:
    snapshot = served.scheduler.snapshot()
    return bool(snapshot.running or snapshot.waiting)


def _shared_story(served: Served) -> SharedStory:
    story = _features(served.request).shared_story
    if story is None:
        raise _refused(400, NOT_MULTIPLAYER, success=False, error=NOT_MULTIPLAYER)
    return story


@json_route(
    router, "/api/extra/multiplayer/status", MultiplayerStatusRequest, KOBOLD, optional=True
)
async def multiplayer_status(body: MultiplayerStatusRequest, served: Served) -> MultiplayerStatus:
    """The shared story's turn, and whether the asker may write now (`idle`)."""
    story = _features(served.request).shared_story
    if story is None:  # KoboldCpp's body for this one has no `success`
        raise _refused(400, NOT_MULTIPLAYER, error=NOT_MULTIPLAYER)
    state = story.status(body.sender, sender_busy=body.senderbusy, generating=_generating(served))
    return {
        "turn_major": state.turn.major,
        "turn_minor": state.turn.minor,
        "idle": state.idle,
        "data_format": state.data_format,
    }


class EmptyRequest(BaseModel):
    """A body with nothing needed in it (an empty object, or none)."""

    model_config = ConfigDict(extra="allow")


@router.post(
    "/api/extra/multiplayer/getstory",
    dependencies=[key_required(KOBOLD)],
    openapi_extra=json_body(EmptyRequest, required=False),
    response_class=PlainTextResponse,
)
async def multiplayer_get_story(request: Request) -> PlainTextResponse:
    """The shared story as last written, as text ("" before any); Hearth adds its turn in the
    X-Hearth-Turn-Major and X-Hearth-Turn-Minor headers."""
    await parse_json_body(request, EmptyRequest, KOBOLD, optional=True)
    story = _features(request).shared_story
    if story is None:  # KoboldCpp answers an empty body
        raise _refused(400, NOT_MULTIPLAYER)
    text, turn = story.story()
    headers = {"X-Hearth-Turn-Major": str(turn.major), "X-Hearth-Turn-Minor": str(turn.minor)}
    return PlainTextResponse(text, headers=headers)


@json_route(router, "/api/extra/multiplayer/setstory", MultiplayerStoryRequest, KOBOLD)
async def multiplayer_set_story(
    body: MultiplayerStoryRequest, served: Served
) -> MultiplayerWritten:
    """Replace the shared story; the turn moves on (a new major turn for a `full_update`)."""
    story = _shared_story(served)
    generating = _generating(served)
    based_on = None
    if body.turn_major is not None or body.turn_minor is not None:
        based_on = Turn(body.turn_major or 0, body.turn_minor or 0)
    try:
        state = story.write(
            body.data,
            data_format=body.data_format,
            sender=body.sender,
            full_update=body.full_update,
            based_on=based_on,
            generating=generating,
        )
    except StaleStory as exc:
        now = story.story()[1]  # the turn to fetch the story at
        raise _refused(
            409, str(exc), success=False, error=str(exc), turn_major=now.major, turn_minor=now.minor
        ) from None
    except StoryRefused as exc:
        raise _refused(400, str(exc), success=False, error=str(exc)) from None
    return {
        "success": True,
        "turn_major": state.turn.major,
        "turn_minor": state.turn.minor,
        "idle": state.idle,
        "data_format": state.data_format,
    }


# -- save slots ------------------------------------------------------------------------------


class SaveRequest(BaseModel):
    """POST /api/extra/data/save: a story for a slot (no data: empty the slot)."""

    model_config = ConfigDict(extra="allow")

    slot: Any = None  # Lite sends "3"; KoboldCpp reads anything not a number as no slot
    title: Text = ""
    format: Text = ""
    data: Text = ""


class LoadRequest(BaseModel):
    """POST /api/extra/data/load: which slot."""

    model_config = ConfigDict(extra="allow")

    slot: Any = 0


class SavedSlot(TypedDict):
    title: str
    format: str
    data: str


class LoadAnswer(TypedDict):
    success: bool
    data: SavedSlot | None


class SaveAnswer(TypedDict):
    success: bool
    error: str


def _slot_number(value: Any, fallback: int) -> int:
    """KoboldCpp's tryparseint: a whole number, or its text; anything else is `fallback`."""
    if isinstance(value, bool):
        return fallback
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        return fallback


def _save_slots(served: Served) -> SaveSlots:
    slots = _features(served.request).save_slots
    if slots is None:
        raise _refused(400, NOT_SAVEDATA, success=False, error=NOT_SAVEDATA)
    return slots


@json_route(router, "/api/extra/data/list", EmptyRequest, KOBOLD, optional=True)
async def data_list(body: EmptyRequest, served: Served) -> list[str]:
    """Every save slot's title, "" for an empty one."""
    slots = _features(served.request).save_slots
    if slots is None:  # KoboldCpp sends no answer at all
        raise _refused(400, NOT_SAVEDATA)
    return await asyncio.to_thread(slots.titles)


@json_route(router, "/api/extra/data/load", LoadRequest, KOBOLD, optional=True)
async def data_load(body: LoadRequest, served: Served) -> LoadAnswer:
    """What a slot holds; an empty slot (or none such) is `{"success": false, "data": null}`
    with a 404."""
    slots = _features(served.request).save_slots
    saved = None
    if slots is not None:
        saved = await asyncio.to_thread(slots.load, _slot_number(body.slot, 0))
    if slots is None:
        raise _refused(400, NOT_SAVEDATA, success=False, data=None)
    if saved is None:
        raise _refused(
            404, "That save slot is empty.", ErrorKind.NOT_FOUND, success=False, data=None
        )
    return {
        "success": True,
        "data": {"title": saved.title, "format": saved.format, "data": saved.data},
    }


@json_route(router, "/api/extra/data/save", SaveRequest, KOBOLD)
async def data_save(body: SaveRequest, served: Served) -> SaveAnswer:
    """Save a story into a slot, or empty the slot when `data` is empty."""
    slots = _save_slots(served)
    slot = _slot_number(body.slot, -1)
    try:
        await asyncio.to_thread(slots.save, slot, body.title, body.format, body.data)
    except SaveRefused as exc:
        raise _refused(400, str(exc), success=False, error=str(exc)) from None
    return {"success": True, "error": ""}


# -- web search ------------------------------------------------------------------------------


class WebSearchRequest(BaseModel):
    """POST /api/extra/websearch: the query."""

    model_config = ConfigDict(extra="allow")

    q: Text = ""


@json_route(router, "/api/extra/websearch", WebSearchRequest, KOBOLD)
async def websearch(body: WebSearchRequest, served: Served) -> list[WebResult]:
    """The web's results for `q`, each with the text around its snippet on its page."""
    search = _features(served.request).web_search
    if search is None:  # KoboldCpp answers [] (with 200)
        raise _refused(400, NOT_WEBSEARCH)
    try:
        return await search.results(body.q)
    except SearchFailed as exc:  # KoboldCpp answers [] (with 200)
        logger.warning("Web search for a KoboldAI Lite page: %s", exc)
        raise _refused(502, f"The web search failed: {exc}", ErrorKind.SERVER) from None
