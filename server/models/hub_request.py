"""One request to the Hugging Face Hub, its failures turned into one `ModelFileError` sentence.

Used by the downloads (server/models/hub_files.py) and the launcher's search
(server/models/hub.py). `HF_ENDPOINT` and `HF_TOKEN` apply, as huggingface_hub reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from server.base.netcheck import reachable
from server.models.download import download_error
from server.models.files import ModelFileError


def hub_call(repo: str, call: Callable[[Any], Any], filename: str = "") -> Any:
    """Run a hub request; its failures become one sentence."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub import errors as hub_errors

    where = f"{repo}/{filename}" if filename else repo
    if not reachable(constants.ENDPOINT):
        # huggingface_hub retries a refused connection with backoff for ~20 s first
        raise ModelFileError(f"{where}: cannot reach {constants.ENDPOINT} (is the network down?)")
    try:
        return call(HfApi())
    except hub_errors.GatedRepoError:
        raise ModelFileError(
            f"{repo} is gated: accept its terms on huggingface.co, then set HF_TOKEN "
            "(or the launcher's token field)"
        ) from None
    except hub_errors.RepositoryNotFoundError:
        raise ModelFileError(
            f"{repo}: no such repository on {constants.ENDPOINT} (a private one needs HF_TOKEN)"
        ) from None
    except (hub_errors.EntryNotFoundError, hub_errors.RevisionNotFoundError):
        raise ModelFileError(f"{where}: no such file in the repository") from None
    except hub_errors.HfHubHTTPError as exc:
        raise ModelFileError(f"{where}: the hub answered {_status(exc)}") from None
    except OSError as exc:
        raise download_error(where, exc) from None
    except Exception as exc:  # network errors come from httpx or requests, by version
        if "connect" in type(exc).__name__.lower() or "timeout" in type(exc).__name__.lower():
            raise ModelFileError(
                f"{where}: cannot reach {constants.ENDPOINT} (is the network down?)"
            ) from None
        raise


def _status(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return f"HTTP {code}" if code else str(exc).splitlines()[0]
