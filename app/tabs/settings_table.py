"""Every setting the launcher shows, once: its kind of field, caption and placeholder, and what
its tooltip adds to the settings model's description. Ranges, defaults and descriptions come
from `HearthSettings` (see app.tabs.bindings); which tab shows what, in which order, is in
app.tabs.settings_tabs. A setting shown on two tabs (as in KoboldCpp) is one binding used twice.

Only settings the server honours appear. There is no "Use Jinja" box: Hearth always uses the
model's own chat template when the GGUF has one (KoboldCpp's --jinja is implied), and the
`jinja` key of a .kcpps file is kept as it was. A template of the user's own is a file (Jinja
Template, beside the model files as KoboldCpp's Loaded Files tab has it); llama-server's
`--chat-template NAME|TEXT` has no field, and a .kcpps file's value is kept.
"""

from __future__ import annotations

from app.settings_store import LAUNCHER_MIN_MULTIUSER
from app.tabs.bindings import (
    Check,
    Choice,
    Decimal,
    File,
    Files,
    Folder,
    KvTypeChoice,
    Number,
    Shares,
    Text,
)
from server.base.defaults import DEFAULT_BATCH

# -- shown on two tabs ----------------------------------------------------------------------

CONTEXT_SIZE = Number(
    "contextsize",
    "Context Size:",
    step=256,
    more="What the model can see at once: prompt plus reply ({min} to {max}).",
)
QUIET = Check("quiet", "Quiet Mode", more="Figures still show.")

# -- Quick Launch -----------------------------------------------------------------------------

MODEL = Text("model_param", "GGUF Text Model:", placeholder="Bundled model: Gemma 3 270M (Q4_K_M)")
MODEL_DIR = Folder(
    "modeldir",
    "Model Folder:",
    placeholder="none: serve the model above only",
    title="Choose a folder of GGUF models",
    more="Subfolders too: /v1/models, /api/tags and /api/admin/list_options list them all, "
    "and requests naming no model get the model loaded now. Empty: serve the GGUF Text Model "
    "above only.",
)
MAX_LOADED = Number(
    "maxloadedmodels",
    "Max Loaded Models:",
    more="Each takes its own memory. Needs a model folder.",
)
DEFAULT_MODEL = Text(
    "defaultmodel",
    "Default Model:",
    placeholder="none: unknown names are not found",
    tooltip_text="The model (its name as /v1/models lists it) that serves requests naming a "
    "model the folder does not have. Empty: those requests get 'model not found'. Needs a "
    "model folder.",
)
EMBEDDINGS_MODEL = File(
    "embeddingsmodel",
    "Embeddings Model:",
    placeholder="none: the text model embeds",
    title="Choose a GGUF embedding model",
    file_filter="GGUF models (*.gguf);;All files (*)",
    more="Used by /v1/embeddings, /api/embed and /api/extra/embeddings (KoboldCpp's "
    "--embeddingsmodel); nomic-embed or bge, for example. The text model is slow for long "
    "inputs when its vocabulary is large.",
)
JINJA_TEMPLATE = File(
    "jinjatemplate",
    "Jinja Template:",
    placeholder="none: the model's own chat template",
    title="Choose a Jinja chat template",
    file_filter="Jinja templates (*.jinja *.j2 *.txt);;All files (*)",
    more="KoboldCpp's Jinja Template, llama-server's --chat-template-file: for a model whose "
    "own template is missing or wrong. The server says which template it uses when it starts.",
)
THREADS = Number(
    "threads",
    "Threads:",
    special="Auto",
    shown_as=lambda threads: threads if threads > 0 else -1,  # 0 means Auto too
    tooltip_text="CPU threads for generation. Auto uses every core (up to 8).",
)
LAUNCH_BROWSER = Check("launch", "Launch Browser")

# -- Network ----------------------------------------------------------------------------------

HOST = Text(
    "host",
    "Host:",
    placeholder="127.0.0.1 (this computer only)",
    more="0.0.0.0: every network this computer is on (set a password or API keys then).",
)
PORT = Number("port_param", "Port:", more="Every API is served on it (default {default}).")
MULTIUSER = Number(
    "multiuser",
    "Multiuser Queue:",
    minimum=LAUNCHER_MIN_MULTIUSER,  # KoboldCpp's launcher shows less as 10 (settings_store)
    more="More get HTTP 503; waiters are served in arrival order.",
)
PARALLEL_REQUESTS = Number(
    "parallelrequests",
    "Parallel Requests:",
    minimum=1,  # ≤ 1 shows as 1
    more="1: one at a time.",
)
PASSWORD = Text(
    "password",
    "Password:",
    placeholder="none: anyone who can reach the port may use it",
    secret=True,
    more="Sent as 'Authorization: Bearer …' (or Anthropic's x-api-key).",
)
SSL_CERT = File(
    "ssl_cert_file",
    "SSL Cert:",
    placeholder="none: plain HTTP",
    title="Choose the TLS certificate (PEM)",
    file_filter="PEM files (*.pem *.crt *.key);;All files (*)",
    tooltip_text="Serve HTTPS with this certificate and the SSL Key (KoboldCpp's --ssl).",
)
SSL_KEY = File(
    "ssl_key_file",
    "SSL Key:",
    placeholder="none: plain HTTP",
    title="Choose the TLS private key (PEM)",
    file_filter="PEM files (*.pem *.crt *.key);;All files (*)",
    tooltip_text="The SSL Cert's private key, unencrypted PEM. Never shown or logged.",
)
API_KEYS = Text("api_key", "API Keys:", placeholder="none, or key1,key2", secret=True)
API_KEY_FILE = File(
    "api_key_file",
    "API Key File:",
    placeholder="none",
    title="Choose a file of API keys",
    file_filter="Text files (*.txt *.keys);;All files (*)",
)
METRICS = Check(
    "metrics",
    "Prometheus Metrics",
    more="On the server's address (e.g. http://127.0.0.1:5001/metrics), as llama-server's "
    "--metrics does: its llamacpp:* figures (tokens, speeds, requests running and "
    "waiting) and Hearth's own (503s, aborts, disconnects, queue wait). The password, when "
    "set, guards it.",
)
RPC = Text(
    "rpc",
    "RPC Workers:",
    placeholder="none: every layer on this computer",
    more="Other machines running `hearth rpc-worker` (llama.cpp's RPC): their GPUs (or "
    "memory) take layers of the model as if they were this machine's, for a model too big for "
    "it (llama-server's --rpc). llama.cpp's RPC has no password: use it only on a network you "
    "trust. Empty: every layer stays here.",
)

# -- Context ----------------------------------------------------------------------------------

DEFAULT_GEN_AMOUNT = Number("defaultgenamt", "Default Gen Amt:", more="Frontends usually say.")
BATCH_SIZE = Number(
    "batchsize",
    "Batch Size:",
    step=16,
    minimum=16,
    shown_as=lambda size: size if size >= 16 else DEFAULT_BATCH,
    more="Larger reads long prompts faster.",
)
FAST_FORWARD = Check(
    "nofastforward",
    "FastForwarding",
    inverted=True,
    tooltip_text="Reuse the cached start of the previous prompt instead of reading it again.",
)
CONTEXT_SHIFT = Check(
    "noshift",
    "Use ContextShift",
    inverted=True,
    tooltip_text="When a chat outgrows the context, trim its start and shift the cache "
    "instead of reading everything again. Parallel Requests turn it off.",
)
PROMPT_CACHE = Number(
    "cacheram",
    "Prompt Cache (MiB):",
    step=256,
    special="Off",
    more="As llama-server's --cache-ram (default {default} MiB). Needs FastForwarding.",
)
# The description speaks of --cacheram; and a KoboldCpp user reads 0 as "off", which it is not.
SMART_CACHE = Number(
    "smartcache",
    "SmartCache Slots:",
    special="No limit",
    tooltip_text="At most this many prompts in the prompt cache (KoboldCpp's SmartCache "
    "slots). No limit (0): as many as the Prompt Cache's MiB hold. Unlike KoboldCpp, 0 does "
    "not turn the cache off: set Prompt Cache to Off for that.",
)
CACHE_DIR = Folder(
    "cachedir",
    "Prompt Cache Folder:",
    placeholder="none: in memory only",
    title="Choose a folder for the prompt cache",
    more="Two Hearths may share it; damaged files are skipped and removed.",
)
CACHE_DISK = Number(
    "cachedisk",
    "Cache Folder Limit (MiB):",
    step=1024,
    more="Per model (default {default} MiB).",
)
PRIVATE_CACHE = Check(
    "privatecache",
    "Private Prompt Cache",
    more="For a server shared by people who must not learn anything of each other's prompts.",
)
SLOT_SAVE_PATH = Folder(
    "slot_save_path",
    "Slot Save Folder:",
    placeholder="none: slot files off",
    title="Choose a folder for slot files",
    more="llama-server's --slot-save-path: clients save and restore a slot's prompt by name.",
)
JINJA_TOOLS = Check(
    "jinja_tools",
    "Jinja for Tools",
    more="On by default: tools go to the model's own template and its calls are read as "
    "written (Hermes/Qwen, Llama 3.x, Mistral, Qwen3-Coder, gpt-oss). The model's own chat "
    "template is always used when it has one, so there is no separate Use Jinja box.",
)

JINJA_THINK = Choice(
    "jinjathink",
    "Jinja Thinking:",
    more="For templates that can switch thinking on and off (Qwen3, for example); a request "
    "may still ask otherwise.",
)
THINK_EFFORT = Choice(
    "reasoningeffort",
    "Think Effort:",
    more="For templates that read it (gpt-oss, for example).",
)
JINJA_KWARGS = Text(
    "jinja_kwargs",
    "Jinja Kwargs:",
    placeholder='none, or e.g. {"enable_thinking": false}',
    # The description's example has braces, which a tooltip here never shows.
    tooltip_text="Extra variables for the chat template, as a JSON object (the placeholder "
    "shows one); llama-server's --chat-template-kwargs. Jinja Thinking and Think Effort, when "
    "not default, win over the same names here, and a request's chat_template_kwargs over all.",
)
REASONING_FORMAT = Choice(
    "reasoning_format",
    "Reasoning Format:",
    more="llama-server's --reasoning-format; chat APIs send the thought apart from the answer "
    "(reasoning_content, thinking blocks).",
)
REASONING_BUDGET = Number(
    "reasoning_budget",
    "Reasoning Budget:",
    step=256,
    special="No limit",
    more="llama-server's --reasoning-budget. The server writes the end of the thought itself.",
)

# -- Context: memory and speed (issue 27) -----------------------------------------------------

QUANTIZE_KV = KvTypeChoice(
    "quantkv",
    "Quantize KV:",
    more="The GPU Layers estimate counts it. llama-server's -ctk/-ctv set one half each.",
)
FLASH_ATTENTION = Check(
    "noflashattention",
    "Use FlashAttention",
    inverted=True,
    tooltip_text="Flash attention where the device supports it (llama-server's -fa auto); "
    "off: never. A quantized V cache needs it: without it V stays f16, and the console says so.",
)
LOW_VRAM = Check(
    "lowvram",
    "No KV Offload (Low VRAM)",
    more="Frees GPU memory for layers at the cost of speed.",
)
USE_MMAP = Check("usemmap", "Use MMAP")
USE_MLOCK = Check("usemlock", "Use mlock")
MOE_CPU = Number(
    "moecpu",
    "MoE CPU Layers:",
    special="None",
    more="For mixture-of-experts models only.",
)
NO_BOS = Check("nobostoken", "No BOS Token")
GEN_LIMIT = Number("genlimit", "Gen Limit:", step=64, special="No limit")
SPECULATION = Choice(
    "spec_type",
    "Speculative Decoding:",
    captions={"none": "Off", "ngram-simple": "N-grams (ngram-simple)", "ngram-mod": "ngram-mod"},
    more="The reply is the same; copying code, JSON or quotes is about twice as fast.",
)

# -- Loaded Files (issue 27) ------------------------------------------------------------------

GGUF_FILES = "GGUF files (*.gguf);;All files (*)"
LORA = Files(
    "lora",
    "LoRA:",
    placeholder="none: the model as it is",
    title="Choose LoRA adapters (GGUF)",
    file_filter=GGUF_FILES,
    more="KoboldCpp's Text Lora, llama-server's --lora. Several: choose them together with "
    "Browse…, or separate their paths with ';'.",
)
LORA_MULT = Decimal(
    "loramult",
    "LoRA Multiplier:",
    more="Every adapter's (default {default}; {min} to {max}); a request may ask otherwise.",
)
PROJECTOR = File(
    "mmproj",
    "Vision/Audio Projector (mmproj):",
    placeholder="none: text only",
    title="Choose the model's projector (mmproj GGUF)",
    file_filter="Projectors (*mmproj*.gguf);;GGUF files (*.gguf);;All files (*)",
    more="KoboldCpp's Vision mmproj, llama-server's --mmproj: the mmproj file published with "
    "the model, made for it. The GPU Layers estimate on Quick Launch counts it.",
)
PROJECTOR_CPU = Check(
    "mmprojcpu",
    "Projector on CPU",
    more="Frees its GPU memory for layers; images are read more slowly. Otherwise it goes to "
    "the GPU whenever the model has layers there.",
)
VISION_MIN_TOKENS = Number(
    "visionmintokens",
    "Min Image Tokens:",
    special="Auto",
    more="For projectors whose token count follows the image (Qwen-VL and the like); Auto: "
    "the projector's own.",
)
VISION_MAX_TOKENS = Number(
    "visionmaxtokens",
    "Max Image Tokens:",
    special="Auto",
    more="Fewer tokens read an image faster and coarser. Auto: the projector's own.",
)
DRAFT_MODEL = File(
    "draftmodel",
    "Draft Model:",
    placeholder="none: no draft model",
    title="Choose a GGUF draft model",
    file_filter=GGUF_FILES,
    more="A small model with the same vocabulary (llama-server's --spec-draft-model). The "
    "GPU Layers estimate on Quick Launch counts it.",
)
DRAFT_AMOUNT = Number("draftamount", "Draft Amount:", more="Default {default}.")
DRAFT_GPU_LAYERS = Number(
    "draftgpulayers",
    "Draft GPU Layers:",
    special="Auto",
    more="999 (the default): all of them.",
)
DRAFT_GPU_SPLIT = Shares(
    "draftgpusplit",
    "Draft GPU Split:",
    placeholder="none: by free memory (e.g. 3,1)",
    more="One share per GPU, as 3,1 or 3 1.",
)

# -- Admin ------------------------------------------------------------------------------------

ADMIN = Check(
    "admin",
    "Enable Model Switching",
    more="KoboldCpp's admin mode: clients switch with /api/admin/reload_config, choosing among "
    "what /api/admin/list_options lists. Hearth switches in place, without restarting the "
    "server.",
)
ADMIN_DIR = Folder(
    "admindir",
    "Admin Folder:",
    placeholder="same as the model folder",
    title="Choose the admin folder",
    tooltip_text="Folder of the .kcpps files and GGUF models /api/admin/list_options offers to "
    "switch to (a .kcpps file switches to its model). Empty: the Model Folder of the Quick "
    "Launch tab.",
)
ADMIN_PASSWORD = Text(
    "adminpassword",
    "Admin Password:",
    placeholder="none: no key asked",
    secret=True,
    tooltip_text="Required as 'Authorization: Bearer …' (or x-api-key) on the admin API. "
    "Empty: the server's password (Network tab) guards it; with neither, anyone who can reach "
    "the port may switch the model.",
)
