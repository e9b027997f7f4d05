"""What the console shows, like KoboldCpp's: the API addresses at start, a line per request."""

from __future__ import annotations

import json
import logging

from server.base.netcheck import url_host
from server.core.scheduling.job import Job
from server.core.templates.chat import ChatTemplate
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest
from server.devices.backends import GPU_BUILD_HINT
from server.devices.placement import CPU_ONLY, Placement
from server.process.tls import given_tls_files, url_scheme
from server.settings.config import HearthSettings
from server.settings.key_fates import not_applied, not_applied_lines

logger = logging.getLogger("hearth")

_PREVIEW_CHARS = 120


def setup_console_logging() -> None:
    """Plain lines on stdout; the launcher shows them as its live log."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # The HTTP clients of downloads log every request at INFO: the console keeps Hearth's own
    # progress lines instead.
    for name in ("httpx", "httpx2", "httpcore", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.WARNING)


def announce_backend(
    settings: HearthSettings, placement: Placement, gpu_backends: tuple[str, ...]
) -> None:
    """Say where the model runs, and why not where the user asked, if so."""
    if settings.usevulkan is not None and "Vulkan" not in gpu_backends:
        logger.warning(
            "--usevulkan: this build of llama.cpp has no Vulkan backend, so everything runs on "
            "the CPU. %s",
            GPU_BUILD_HINT,
        )
    if settings.usecuda is not None and "CUDA" not in gpu_backends:
        logger.warning(
            "--usecuda: this build of llama.cpp has no CUDA backend (make install GPU=cuda, "
            "with the CUDA toolkit, builds one), so it runs %s.",
            "on the other GPUs it has" if gpu_backends else "on the CPU",
        )
    logger.info("Backend: %s.", placement.describe())


def announce_not_applied(settings: HearthSettings, source: str | None = None) -> None:
    """Name once each key of the settings file (`source`, its name) that Hearth does not
    apply, and why: a KoboldCpp preset's image model or tunnel must not pass in silence."""
    for line in not_applied_lines(not_applied(settings.model_dump()), source):
        logger.info("%s", line)


def base_url(settings: HearthSettings) -> str:
    """Where a client on this machine reaches the server: https:// when it serves TLS."""
    return f"{url_scheme(settings)}://{url_host(settings.listen_host)}:{settings.port_param}"


def api_addresses(settings: HearthSettings) -> list[tuple[str, str]]:
    base = base_url(settings)
    return [
        ("KoboldAI API", f"{base}/api/"),
        ("KoboldAI stream", f"{base}/api/extra/generate/stream"),
        ("OpenAI API", f"{base}/v1/"),
        ("Anthropic API", f"{base}/v1/messages"),
        ("Ollama API", f"{base}/api/chat"),
    ]


def announce_start(
    settings: HearthSettings,
    model_name: str,
    template: ChatTemplate | None = None,
    placement: Placement = CPU_ONLY,
    gpu_backends: tuple[str, ...] = (),
) -> None:
    """`gpu_backends`: the GPU backends this build of llama.cpp has (server/devices/backends.py)."""
    logger.info("Hearth is serving %s", model_name)
    for label, url in api_addresses(settings):
        logger.info("  %-16s %s", label + ":", url)
    tls = given_tls_files(settings)
    if tls is not None:  # the key's path only, never its contents
        logger.info("HTTPS: certificate %s, private key %s.", *tls)
    announce_backend(settings, placement, gpu_backends)
    if settings.parallelrequests > 1:
        logger.info(
            "Parallel requests: up to %d generated together (continuous batching), "
            "grammar-bound ones (tool calls, JSON formats) included.",
            settings.parallelrequests,
        )
    if template is not None and template.uses_model_template:
        variables = ", ".join(f"{k}={json.dumps(v)}" for k, v in template.kwargs.items())
        logger.info(
            "Chat template: %s (Jinja), for every chat API%s.",
            template.origin,
            f"; with {variables}" if variables else "",
        )
    else:
        # --jinja is implied whenever the model has a template; say why it cannot apply here.
        logger.info(
            "Chat template: this model has none in its GGUF%s; using Hearth's built-in "
            "turn format for its architecture.",
            ", so --jinja has nothing to use" if settings.jinja else "",
        )
    for line in exposure_warning(settings):
        logger.warning("%s", line)


def exposure_warning(settings: HearthSettings) -> list[str]:
    """The warning for a server other machines reach with no key asked (empty: none): what
    anyone on the network can then do, and the flags that stop it."""
    if not settings.exposed_without_password:
        return []
    powers = [
        "generate text and embeddings with every API (KoboldAI, OpenAI, Anthropic, Ollama, "
        "llama.cpp)",
        "read the loaded model's name and settings",
        "download models from Hugging Face onto this disk and delete them (/api/pull, /api/delete)",
    ]
    if settings.admin and not settings.adminpassword:
        powers.append("switch models (--admin without --adminpassword)")
    if settings.lora:
        powers.append("change the LoRA scales for everyone")
    if settings.slot_save_path:
        powers.append("save and restore slots in --slot-save-path")
    if settings.metrics:
        powers.append("read /metrics")
    listed = ", ".join(powers[:-1]) + " and " + powers[-1]
    return [
        f"WARNING: listening on {settings.listen_host} without --password, --api-key or "
        f"--api-key-file: anyone who can reach this machine can {listed}.",
        "Set a key with --password, --api-key or --api-key-file (the launcher's Network tab), "
        "or serve this machine alone with --host 127.0.0.1.",
    ]


class RequestLog:
    """Writes one line per finished request: tokens, timings, speed and how it ended."""

    def __init__(self, quiet: bool = False) -> None:
        self._quiet = quiet

    def finished(self, job: Job) -> None:
        outcome = job.outcome
        if outcome is None:
            return
        request = job.request
        if request.embed_inputs:
            self._embedded(job, outcome)
            return
        ttft = (
            f"{outcome.time_to_first_token:.2f}s"
            if outcome.time_to_first_token is not None
            else "-"
        )
        seconds = outcome.prompt_seconds + outcome.generation_seconds
        speed = (
            outcome.completion_tokens / outcome.generation_seconds
            if outcome.generation_seconds > 0
            else 0.0
        )
        cancelled = outcome.finish_reason is FinishReason.CANCELLED
        stop = "stop string" if outcome.stop_sequence is not None else outcome.finish_reason.value
        if outcome.looped:  # server/core/text/loops.py
            stop += " (the tool call repeated itself)"
        logger.info(
            "[%s] %sprompt %d tokens (%d cached), generated %d tokens, first token %s, "
            "%.2fs, %.1f tokens/s, stop: %s%s",
            request.request_id,
            _key_of(request),
            outcome.prompt_tokens,
            outcome.reused_prompt_tokens,
            outcome.completion_tokens,
            ttft,
            seconds,
            speed,
            stop,
            ", cancelled" if cancelled else "",
        )
        if outcome.error:
            logger.info("[%s] error: %s", request.request_id, outcome.error)
        if not self._quiet:
            logger.info("[%s] input: %r", request.request_id, _preview(request.prompt))
            logger.info("[%s] output: %r", request.request_id, _preview(job.text))

    def _embedded(self, job: Job, outcome: GenerationOutcome) -> None:
        """An embedding request's line: inputs, tokens, decodes, seconds, how it ended."""
        request = job.request
        inputs = len(request.embed_inputs)
        decodes = job.embeddings.decodes if job.embeddings else 0
        logger.info(
            "[%s] %sembedded %d input%s, %d tokens, in %d decode%s, %.2fs, stop: %s",
            request.request_id,
            _key_of(request),
            inputs,
            "" if inputs == 1 else "s",
            outcome.prompt_tokens,
            decodes,
            "" if decodes == 1 else "s",
            outcome.prompt_seconds,
            outcome.finish_reason.value,
        )
        if outcome.error:
            logger.info("[%s] error: %s", request.request_id, outcome.error)
        first = request.embed_inputs[0]
        if not self._quiet and isinstance(first, str):
            logger.info("[%s] input: %r", request.request_id, _preview(first))


def _key_of(request: GenerationRequest) -> str:
    """`key alice, ` for a request that used the API key named alice ("" without keys):
    the name, never the key."""
    return f"key {request.key_name}, " if request.key_name else ""


def _preview(text: str) -> str:
    if len(text) <= _PREVIEW_CHARS:
        return text
    return "…" + text[-_PREVIEW_CHARS:]
