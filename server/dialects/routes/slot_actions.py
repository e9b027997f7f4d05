"""Slot actions from the API: llama-server's slot files and KoboldCpp's save states go through
the queue like any request (a slot changes only while none of them generates) and come back
as one SlotActionEvent (server/core/llama/sequences/slot_states.py does the work).

The file checks are here, at the edge: a name is one plain file name inside --slot-save-path
(no separators, no "..", nothing hidden, no control characters, no Windows device names), and
a save never replaces a file that is not a slot file, so a mistyped name cannot destroy
someone's document, and no name reaches outside the folder (not through a link either).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from server.core.scheduling.scheduler import Scheduler
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SlotAction,
    SlotActionEvent,
)
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error
from server.dialects.pipeline.admission import submit

# llama.cpp's sequence-state files begin with LLAMA_STATE_SEQ_MAGIC, 'ggsq' as a
# little-endian uint32 (a test saves a real one and checks this).
SLOT_FILE_MAGIC = (0x67677371).to_bytes(4, "little")
_MAX_NAME_BYTES = 255
_FORBIDDEN = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*\ufeff]')
_DEVICE_NAMES = re.compile(r"(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$")


def check_file_name(name: str) -> str | None:
    """Why `name` cannot be a slot file's name, or None when it can."""
    if not name:
        return "the file name is empty"
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
        return f"the file name is longer than {_MAX_NAME_BYTES} bytes"
    if any(unicodedata.category(char) == "Cs" for char in name):
        return "the file name is not valid UTF-8"
    if _FORBIDDEN.search(name):
        return 'a file name may not hold path separators, control characters or <>:"|?*'
    if name.startswith(".") or name.endswith((".", " ")) or name.startswith(" "):
        return "a file name may not start with a dot or a space, nor end with one"
    if _DEVICE_NAMES.match(name):
        return "the file name is a reserved device name"
    return None


def slot_file(folder: str, name: str, *, saving: bool, dialect: Dialect) -> Path:
    """The checked path of slot file `name` in `folder`; a 400 saying why when it is not one."""
    problem = check_file_name(name)
    if problem is not None:
        raise APIError(400, f"Invalid filename: {problem}", dialect=dialect)
    root = Path(folder).expanduser()
    if saving:
        root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    path = root / name
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise APIError(400, f"Invalid filename: {name} is not a plain file", dialect=dialect)
    if path.exists() and path.resolve().parent != root:
        raise APIError(400, f"Invalid filename: {name} lies outside the folder", dialect=dialect)
    if saving:
        if path.exists() and not _is_slot_file(path):
            raise APIError(
                400, f"Invalid filename: {name} exists and is not a slot file", dialect=dialect
            )
    elif not path.exists():
        raise APIError(400, f"Unable to restore slot: no slot file named {name}", dialect=dialect)
    return path


def _is_slot_file(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) == SLOT_FILE_MAGIC


async def run_slot_action(
    scheduler: Scheduler, model: ModelInfo, action: SlotAction, dialect: Dialect
) -> SlotActionEvent:
    """Queue the action, wait for it, and return what it did; its failure as an APIError."""
    generation = GenerationRequest(
        request_id=new_id("slot-"), prompt="", max_tokens=0, slot_action=action
    )
    job = submit(scheduler, model, generation, dialect)
    done: SlotActionEvent | None = None
    outcome = GenerationOutcome(FinishReason.ERROR, error="the slot action ended without a word")
    async for event in scheduler.events(job):
        if isinstance(event, SlotActionEvent):
            done = event
        elif isinstance(event, GenerationOutcome):
            outcome = event
            break
    if outcome.server_stopping:
        raise busy_error()
    if outcome.finish_reason is not FinishReason.STOP or done is None:
        status, kind = (
            (400, ErrorKind.BAD_INPUT) if outcome.input_rejected else (500, ErrorKind.SERVER)
        )
        raise APIError(status, outcome.error or "the slot action failed", kind, dialect)
    return done
