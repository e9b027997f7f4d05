"use strict";
// Hearth's chat page. Plain JS, no build step; marked, DOMPurify and highlight.js are vendored
// under /chat-files/vendor/ (see resources/README.md). The page's Content-Security-Policy
// (set by server/dialects/pages.py) allows scripts from Hearth only, so even markup that slipped
// through could not run script or load anything remote.

const STORE = "hearth.chat.v2", OLD_STORE = "hearth.chat.v1", STORY_STORE = "hearth.story.v1";
const KEY_STORE = "hearth.password", MODEL_STORE = "hearth.model", MODE_STORE = "hearth.mode";
const POLL_STORE = "hearth.poll", THINK_STORE = "hearth.think";
const UNDO_DEPTH = 20;  // story texts kept for Undo/Retry: each is a whole copy of the story
// A dropped stream is fetched again this many times, waiting longer each time (the server
// keeps it for --resumegrace seconds, 30 by default).
const RESUME_DELAYS_MS = [250, 500, 1000, 2000, 3000, 4000, 5000, 5000, 5000, 5000];
const $ = (id) => document.getElementById(id);
let running = null;  // {genkey, controller} while a reply or continuation is being written
let contextSize = null;
let modelMeta = {};  // model id -> /v1/models' `meta` (says whether it has a chat template)
let editingIndex = null;  // the earlier user turn being edited (sending makes a branch)
let modePicked = false;  // the user chose a mode on this page: detection must not undo it
let templateKnown = null;  // whether the chosen model has a chat template (null: unknown)
const BASE_MODEL = "Story mode: this model has no chat template (a base model), so it is best "
  + "at continuing text. Chat still works, in Hearth's plain built-in format.";

// ---------------------------------------------------------------------------------------------
// Markdown, rendered safely. Model output is untrusted: raw HTML in it is shown as text (never
// parsed), images become their alt text (nothing remote loads), and DOMPurify cleans whatever
// marked produced, keeping only http(s)/mailto/#fragment links, which open in a new tab with
// rel=noopener.

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"})[c]);
}
const markdown = new marked.Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html(token) { return escapeHtml(token.text || token.raw || ""); },
    image(token) { return escapeHtml(token.text ? `[image: ${token.text}]` : "[image]"); },
  },
});
const PURIFY = {
  FORBID_TAGS: ["img", "image", "style", "iframe", "frame", "frameset", "object", "embed",
    "form", "input", "button", "textarea", "select", "video", "audio", "source", "track",
    "picture", "svg", "math", "link", "meta", "base", "script", "template"],
  FORBID_ATTR: ["style", "srcset", "src", "action", "formaction", "background", "poster",
    "xlink:href"],
  ALLOW_DATA_ATTR: false,
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  RETURN_DOM_FRAGMENT: true,
};
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

// Markdown text -> a sanitized DocumentFragment with highlighted code and Copy buttons.
function renderMarkdown(text) {
  const fragment = DOMPurify.sanitize(markdown.parse(text), PURIFY);
  for (const code of fragment.querySelectorAll("pre > code")) {
    // highlight.js reads textContent and writes its own spans: the code stays text.
    if (/\blanguage-\w/.test(code.className)) {
      const language = code.className.match(/\blanguage-([\w+#-]+)/)[1];
      if (hljs.getLanguage(language)) hljs.highlightElement(code);
    }
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy";
    copy.textContent = "Copy";
    copy.onclick = () => copyText(code.textContent, copy);
    code.parentElement.appendChild(copy);
  }
  return fragment;
}
// For the tests and for anyone poking at the page: the renderer on its own.
window.hearthRender = (text) => {
  const holder = document.createElement("div");
  holder.appendChild(renderMarkdown(text));
  return holder;
};

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {
    // No clipboard API off localhost (not a secure context): copy the old way.
    const area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

// ---------------------------------------------------------------------------------------------
// Conversations: {current, conversations: [{id, title, messages, updated}]} in localStorage.
// A user message's images (images.js) are data: URIs in its `images`; its sounds, {name,
// format, data}, in its `audio` (data left out when too large to store: see soundClip).

function newId() { return Date.now().toString(36) + Math.random().toString(36).slice(2, 8); }
function newConversation(title = "New chat", messages = []) {
  return {id: newId(), title, messages, updated: Date.now()};
}
function loadStore() {
  let store = null;
  try { store = JSON.parse(localStorage.getItem(STORE) || "null"); } catch (_) { store = null; }
  if (!store || !Array.isArray(store.conversations)) store = {current: null, conversations: []};
  // The single conversation of the page before version 2 becomes the first of the list.
  const old = localStorage.getItem(OLD_STORE);
  if (old !== null) {
    try {
      const messages = validMessages(JSON.parse(old));
      if (messages && messages.length) {
        const earlier = newConversation(titleFrom(messages), messages);
        store.conversations.push(earlier);
        store.current = earlier.id;
      }
    } catch (_) { /* unreadable: nothing to keep */ }
    localStorage.removeItem(OLD_STORE);
  }
  if (!store.conversations.length) store.conversations.push(newConversation());
  if (!store.conversations.some((c) => c.id === store.current)) {
    store.current = store.conversations[0].id;
  }
  return store;
}
let store = loadStore();
saveStore();

// Storage that is full (images fill it fastest) is said above the log; the conversations
// stay in the page until it closes.
function saveStore() {
  try {
    localStorage.setItem(STORE, JSON.stringify(store));
    $("storage-note").hidden = true;
  } catch (_) {
    $("storage-note").hidden = false;
  }
}
function conversation() { return store.conversations.find((c) => c.id === store.current); }
function messages() { return conversation().messages; }
function touch() {
  const c = conversation();
  c.updated = Date.now();
  if (c.title === "New chat" && c.messages.length) c.title = titleFrom(c.messages);
  saveStore();
  renderList();
}
function titleFrom(list) {
  const first = list.find((m) => m.role === "user");
  const text = first ? first.content.replace(/\s+/g, " ").trim() : "";
  if (!text) return first && first.images ? "Image" : first && first.audio ? "Sound" : "New chat";
  return text.length > 40 ? text.slice(0, 40) + "…" : text;
}
// A list of {role, content} with known roles and string content (and an assistant turn's
// `reasoning`, the model's thought, a user turn's `images`, when it has them), or null.
function validMessages(list) {
  if (!Array.isArray(list)) return null;
  const roles = ["system", "user", "assistant"];
  const good = list.every((m) => m && typeof m === "object" && roles.includes(m.role)
    && typeof m.content === "string");
  if (!good) return null;
  return list.map((m) => {
    const kept = {role: m.role, content: m.content};
    if (typeof m.reasoning === "string" && m.reasoning) kept.reasoning = m.reasoning;
    const images = storedImages(m.images);
    if (images.length) kept.images = images;
    const sounds = storedSounds(m.audio);
    if (sounds.length) kept.audio = sounds;
    return kept;
  });
}

function renderList() {
  const list = $("conversations");
  list.replaceChildren();
  const ordered = [...store.conversations].sort((a, b) => b.updated - a.updated);
  for (const c of ordered) {
    const item = document.createElement("li");
    item.dataset.id = c.id;
    if (c.id === store.current) item.setAttribute("aria-current", "true");
    const title = button(c.title, "title", () => switchTo(c.id));
    title.title = c.title;
    const rename = button("✎", "small rename", () => startRename(item, c));
    const erase = button("✕", "small delete", () => remove(c));
    rename.title = "Rename";
    erase.title = "Delete";
    rename.setAttribute("aria-label", `Rename "${c.title}"`);
    erase.setAttribute("aria-label", `Delete "${c.title}"`);
    item.append(title, rename, erase);
    list.appendChild(item);
  }
}
function button(text, className, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = className;
  b.textContent = text;
  b.onclick = onclick;
  return b;
}
function switchTo(id) {
  if (running) return;
  store.current = id;
  saveStore();
  cancelEdit();
  renderList();
  render();
  if (window.matchMedia("(max-width: 700px)").matches) setSidebar(false);
}
function startRename(item, c) {
  const field = document.createElement("input");
  field.value = c.title;
  field.setAttribute("aria-label", "Conversation name");
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    if (keep && field.value.trim()) { c.title = field.value.trim(); saveStore(); }
    renderList();
  };
  field.onkeydown = (event) => {
    if (event.key === "Enter") finish(true);
    if (event.key === "Escape") finish(false);
  };
  field.onblur = () => finish(true);
  item.replaceChildren(field);
  field.focus();
  field.select();
}
function remove(c) {
  if (running && c.id === store.current) return;
  if (!confirm(`Delete "${c.title}"?`)) return;
  store.conversations = store.conversations.filter((other) => other.id !== c.id);
  if (!store.conversations.length) store.conversations.push(newConversation());
  if (c.id === store.current) {
    store.current = [...store.conversations].sort((a, b) => b.updated - a.updated)[0].id;
    render();
  }
  saveStore();
  renderList();
}

function sideNotice(text, kind = "error") {
  $("side-notice").textContent = text;
  $("side-notice").dataset.kind = kind;
}
function exportAll() {
  const data = {format: "hearth-chats", version: 2, exported: new Date().toISOString(),
    conversations: store.conversations.map((c) => ({title: c.title, updated: c.updated,
      messages: c.messages}))};
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)],
    {type: "application/json"}));
  const link = document.createElement("a");
  link.href = url;
  link.download = `hearth-chats-${new Date().toISOString().slice(0, 10)}.json`;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
// Validates an export (this page's format) and adds its conversations beside the ones here.
function importText(text) {
  let data;
  try { data = JSON.parse(text); } catch (_) {
    throw new Error("Not a Hearth chat export: the file is not JSON.");
  }
  if (!data || data.format !== "hearth-chats" || !Array.isArray(data.conversations)) {
    throw new Error("Not a Hearth chat export: it has no \"hearth-chats\" format and "
      + "conversations list.");
  }
  const added = data.conversations.map((c, index) => {
    const list = c && validMessages(c.messages);
    if (!list) {
      throw new Error(`Conversation ${index + 1} is damaged: each message needs a role `
        + "(system, user or assistant) and text content. Nothing was imported.");
    }
    const title = typeof c.title === "string" && c.title.trim() ? c.title.trim() : titleFrom(list);
    return {...newConversation(title, list), updated: Number(c.updated) || Date.now()};
  });
  if (!added.length) throw new Error("The file holds no conversations.");
  store.conversations.push(...added);
  store.current = added[0].id;
  saveStore();
  renderList();
  render();
  return added.length;
}

// ---------------------------------------------------------------------------------------------
// The chat log.

function setStatus(text) { $("status").textContent = text; }

function render() {
  $("log").replaceChildren();
  messages().forEach((m, index) => {
    showImages(addTurn(m.role, m.content, index, m.reasoning), m.images, m.audio);
  });
}
function addTurn(role, text, index, reasoning) {
  const div = document.createElement("div");
  div.className = "turn " + role;
  const body = document.createElement("div");
  body.className = "body";
  div.appendChild(body);
  if (reasoning) showThought(div, reasoning, false);
  showText(body, role, text);
  if (role === "user") {
    const tools = document.createElement("span");
    tools.className = "turn-tools";
    tools.appendChild(button("Edit", "edit", () => startEdit(index)));
    div.appendChild(tools);
  }
  $("log").appendChild(div);
  $("log").scrollTop = $("log").scrollHeight;
  return div;
}
// What a turn shows: the user's words as typed; the model's as sanitized markdown.
function showText(body, role, text) {
  if (role === "assistant") body.replaceChildren(renderMarkdown(text));
  else body.textContent = text;
}
// A thinking model's thought: a folded block above the answer, written into as it streams
// (`live`: still thinking). Shown as plain text: a thought is a draft, not a document.
function showThought(turn, text, live) {
  let block = turn.querySelector("details.thought");
  if (!block) {
    block = document.createElement("details");
    block.className = "thought";
    const summary = document.createElement("summary");
    const body = document.createElement("div");
    body.className = "thought-body";
    block.append(summary, body);
    turn.insertBefore(block, turn.querySelector(".body"));
  }
  block.querySelector("summary").textContent = live ? "Thinking…" : "Thought";
  block.dataset.live = String(live);
  block.querySelector(".thought-body").textContent = text;
}
function notice(text) {
  const div = document.createElement("div");
  div.className = "notice";
  div.textContent = text;
  $("log").appendChild(div);
}

function startEdit(index) {
  if (running) return;
  editingIndex = index;
  $("prompt").value = messages()[index].content;
  setAttachments(messages()[index].images || [], storedSounds(messages()[index].audio));
  $("editing").hidden = false;
  $("prompt").focus();
}
function cancelEdit() {
  editingIndex = null;
  $("editing").hidden = true;
}

// ---------------------------------------------------------------------------------------------
// Talking to the server.

function headers() {
  const h = {"Content-Type": "application/json"};
  const key = localStorage.getItem(KEY_STORE);
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}
async function getJson(path) {
  const key = localStorage.getItem(KEY_STORE);
  const response = await fetch(path, {headers: key ? {"Authorization": "Bearer " + key} : {}});
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

// Reads a text/event-stream body into events {id, event, data}, in order, as each completes.
// The only place the page reads SSE: both dialects' streams go through it, so resuming a broken
// stream (Last-Event-ID, the last `id` seen) can be added here once.
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", lastId = null, type = "", data = [];
  // When each event was complete (`at`, performance.now()): a stream whose events all arrive
  // at once was held back on the way (see lumpedStream).
  for (;;) {
    const {done, value} = await reader.read();
    const at = performance.now();
    buffer += done ? decoder.decode() : decoder.decode(value, {stream: true});
    // Events arrive in arbitrary pieces: only whole lines are read, the rest waits. A lone
    // CR at the end may be half of a CRLF, so it waits too (unless the body has ended).
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffer);
      if (!match || (!done && match[0] === "\r" && match.index === buffer.length - 1)) break;
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      if (line === "") {
        if (data.length) {
          yield {id: lastId, event: type || "message", data: data.join("\n"), at};
        }
        type = "";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;  // a comment: keep-alive pings
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "data") data.push(text);
      else if (field === "event") type = text;
      else if (field === "id" && !text.includes("\0")) lastId = text;
    }
    if (done) return;  // an event not ended by a blank line is dropped, as EventSource does
  }
}

// A stream asked for as resumable: when the connection drops (a network error, or the body
// ending before the stream's last event), the rest is fetched from /api/extra/stream/{name}
// after the last event id seen, and reading goes on as if nothing happened. `isEnd` says which
// event ends the stream. Events from a resumed connection carry `resumed: true`.
async function* resumableEvents(response, controller, isEnd) {
  const name = response.headers.get("X-Hearth-Stream-Id");
  let current = response, lastId = null, resumed = false;
  for (;;) {
    try {
      for await (const event of sseEvents(current)) {
        if (event.id !== null) lastId = event.id;
        yield {...event, resumed};
        if (isEnd(event)) return;
      }
    } catch (error) {
      if (controller.signal.aborted || !(error instanceof TypeError)) throw error;
    }
    if (!name) throw new TypeError("The connection dropped.");  // not resumable
    current = await resume(name, lastId, controller);
    resumed = true;
  }
}
async function resume(name, lastId, controller) {
  const h = headers();
  if (lastId !== null) h["Last-Event-ID"] = lastId;
  for (const delay of RESUME_DELAYS_MS) {
    setStatus("Connection lost; resuming…");
    await new Promise((resolve) => setTimeout(resolve, delay));
    if (controller.signal.aborted) throw new DOMException("Stopped", "AbortError");
    let response;
    try {
      response = await fetch(`/api/extra/stream/${encodeURIComponent(name)}`,
        {headers: h, signal: controller.signal});
    } catch (error) {
      if (error instanceof TypeError) continue;  // still offline: try again
      throw error;
    }
    if (response.ok) {
      setStatus("Generating…");
      return response;
    }
    if (response.status === 404) {
      throw new Error("The connection dropped, and the server no longer has this reply "
        + "(it waited for the page longer than its --resumegrace).");
    }
    if (response.status !== 502 && response.status !== 503 && response.status !== 504) {
      throw new Error(await explain(response));
    }
  }
  throw new TypeError("The server cannot be reached.");
}

// A proxy that buffers whole responses (some reverse proxies, tunnels, antivirus filters)
// delivers a stream in one lump at its end: the page then learns nothing while the reply is
// written. Seen as: the response's headers only arrived after about as long as the server
// says the generation took (Hearth sends them at once, before the request even waits in
// line), and then its events came together, not spread over that time as live ones are (a
// loose bound: an event's time is when the page got to read it, after rendering the ones
// before). How the lump is cut into network reads does not matter.
function lumpedStream(events, headersAfterMs, timings) {
  const spreadMs = events.length ? events[events.length - 1].at - events[0].at : 0;
  // What was weighed, for whoever wonders why the page did (not) switch (the tests too).
  document.body.dataset.lastStream = JSON.stringify({events: events.length, spreadMs,
    headersAfterMs, timings});
  if (!timings || !(timings.predicted_ms > 150) || events.length < 4) return false;
  if (events.some((event) => event.resumed)) return false;
  return spreadMs < 0.5 * timings.predicted_ms
    && headersAfterMs >= 0.8 * (timings.predicted_ms + (timings.prompt_ms || 0));
}
// Said once, above both Chat and Story, and remembered: the next replies poll.
function switchToPolling() {
  $("poll").checked = true;
  localStorage.setItem(POLL_STORE, "1");
  $("network-note").textContent = "Replies reach this page in one piece: something between it "
    + "and Hearth (a proxy?) holds streams back until they end. Switched to polling, which "
    + "shows a reply as it grows.";
  $("network-note").hidden = false;
}

async function explain(response) {
  if (response.status === 401) {
    const key = prompt("This server needs a password:");
    if (key !== null) localStorage.setItem(KEY_STORE, key);
    return "The server needs a password; it is saved, send again.";
  }
  if (response.status === 503) return "The server is busy; try again in a moment.";
  let detail = "";
  try {
    const body = await response.json();
    detail = (body.error && body.error.message) || (body.detail && body.detail.msg) || "";
  } catch (_) { /* not JSON */ }
  return `The server answered ${response.status}. ${detail}`;
}

// Tokens per second, live: content deltas (one per token) after the first, over the time since
// the first arrived, so the wait for the prompt does not count. The server's own count
// (usage.completion_tokens) gives the final figure.
function speedMeter() {
  const started = performance.now();
  let first = null, count = 0;
  const rate = (tokens) => {
    const seconds = (performance.now() - first) / 1000;
    return tokens > 1 && seconds > 0 ? (tokens - 1) / seconds : null;
  };
  return {
    tick() {
      count += 1;
      if (first === null) first = performance.now();
      const r = rate(count);
      $("speed").textContent = r === null ? "" : `${r.toFixed(1)} tok/s so far`;
    },
    final(tokens) {
      $("speed").textContent = "";
      if (!tokens) return "";
      // Polling sees no tokens arrive: then the whole request's time is all there is.
      const r = first === null ? tokens / ((performance.now() - started) / 1000) : rate(tokens);
      return `${tokens} tokens, ${r === null ? "–" : r.toFixed(1)} tokens/s`;
    },
  };
}
function showContext(used) {
  const label = $("context");
  if (!used || !contextSize) { label.textContent = used ? `Context ${used}` : ""; return; }
  label.textContent = `Context ${used} / ${contextSize}`;
  label.dataset.level = used / contextSize > 0.9 ? "high" : "ok";
}

function chatBody(stream, genkey, continuing) {
  const system = $("system").value.trim();
  // Earlier thoughts go back as llama-server's reasoning_content: the template decides
  // whether the model sees them.
  const contents = requestContents(messages());
  const turns = messages().map((m, index) => (m.reasoning
    ? {role: m.role, content: contents[index], reasoning_content: m.reasoning}
    : {role: m.role, content: contents[index]}));
  const history = system ? [{role: "system", content: system}, ...turns] : turns;
  const body = {model: chosenModel(), messages: history, stream, genkey,
    max_tokens: Number($("max-tokens").value) || 200,
    temperature: Number($("temperature").value)};
  // Hearth carries a final assistant message on (prefill) when asked: the reply grows.
  if (continuing) body.continue_final_message = true;
  // The Think toggle, for a model that thinks: on leaves it to the server and the template;
  // off asks for no thought at all (the template is told so, and a thought the model opens
  // anyway is closed at once: a budget of 0).
  if (!$("think-toggle").hidden && !$("think").checked) body.reasoning_effort = "none";
  return body;
}

// Asks for a resumable stream; its name goes on `holder` (data-stream), and how long its
// headers took comes back for the buffering check.
async function openStream(path, body, controller, holder) {
  const sent = performance.now();
  const response = await fetch(path, {method: "POST", headers: headers(),
    body: JSON.stringify(body), signal: controller.signal});
  if (!response.ok) throw new Error(await explain(response));
  holder.dataset.stream = response.headers.get("X-Hearth-Stream-Id") || "";
  return {response, headersAfter: performance.now() - sent};
}

// `onProgress` hears llama-server's `prompt_progress` ({total, cache, processed, time_ms}) while
// the prompt is read; `onThought` the thought so far (`reasoning_content`), as it streams.
async function streamReply(onText, meter, genkey, controller, continuing, turn, onProgress,
  onThought) {
  const {response, headersAfter} = await openStream("/v1/chat/completions",
    {...chatBody(true, genkey, continuing), return_progress: true,
      stream_options: {include_usage: true, resumable: true}}, controller, turn);
  let text = "", reasoning = "", usage = null, timings = null;
  const events = [];
  const isEnd = (event) => event.data === "[DONE]";
  for await (const event of resumableEvents(response, controller, isEnd)) {
    events.push(event);
    if (isEnd(event)) break;
    const chunk = JSON.parse(event.data);
    if (chunk.error) throw new Error(chunk.error.message || "The stream broke.");
    if (chunk.usage) usage = chunk.usage;
    if (chunk.timings) timings = chunk.timings;
    if (chunk.prompt_progress) onProgress(chunk.prompt_progress);
    const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
    if (delta && delta.reasoning_content) {
      reasoning += delta.reasoning_content;
      meter.tick();
      onThought(reasoning);
    }
    if (delta && delta.content) { text += delta.content; meter.tick(); onText(text); }
  }
  if (lumpedStream(events, headersAfter, timings)) switchToPolling();
  return {text, reasoning, usage};
}

async function pollReply(onText, meter, genkey, controller, continuing) {
  const finished = fetch("/v1/chat/completions", {method: "POST", headers: headers(),
    body: JSON.stringify(chatBody(false, genkey, continuing)), signal: controller.signal});
  const body = await pollUntilDone(finished, genkey, controller, onText);
  const message = body.choices[0].message;
  return {text: message.content || "", reasoning: message.reasoning_content || "",
    usage: body.usage};
}
// Waits for a non-streamed request's answer (its JSON), showing the text so far meanwhile:
// /api/extra/generate/check by its genkey, every 300 ms.
async function pollUntilDone(finished, genkey, controller, onText) {
  let result = null;
  finished.then((r) => { result = r; }, () => {});
  while (result === null && !controller.signal.aborted) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const check = await fetch("/api/extra/generate/check", {method: "POST", headers: headers(),
      body: JSON.stringify({genkey})});
    if (check.ok) onText((await check.json()).results[0].text);
  }
  const response = await finished;
  if (!response.ok) throw new Error(await explain(response));
  return response.json();
}

function setRunning(value) {
  running = value;
  if (!value) $("speed").textContent = "";
  for (const id of ["send", "regenerate", "continue", "story-continue", "clear", "mode-chat",
    "mode-story"]) $(id).disabled = Boolean(value);
  $("stop").disabled = !value;
  $("story").readOnly = Boolean(value);
  storyButtons();
}
// Retry and Undo need a continuation to act on.
function storyButtons() {
  $("story-retry").disabled = $("story-undo").disabled = Boolean(running) || !story.undo.length;
}

// Writes a reply into the log: a new turn, or (continuing) more of the last one.
async function generate(continuing = false) {
  const genkey = "chat-" + Math.random().toString(36).slice(2);
  const controller = new AbortController();
  setRunning({genkey, controller});
  setStatus("Generating…");
  const list = messages();
  const base = continuing ? list[list.length - 1].content : "";
  const baseThought = continuing ? list[list.length - 1].reasoning || "" : "";
  const turns = $("log").querySelectorAll(".turn.assistant");
  const turn = continuing && turns.length ? turns[turns.length - 1] : addTurn("assistant", "");
  const body = turn.querySelector(".body");
  let shown = base, thought = baseThought;
  const onText = (text) => { shown = base + text; showText(body, "assistant", shown); };
  const onThought = (text) => {
    thought = baseThought + text;
    if (reading) { reading.remove(); reading = null; }  // the model is past the prompt
    showThought(turn, thought, true);
  };
  // While the server reads a long conversation, how far it has got instead of a silent wait;
  // the reply's first text replaces it (showText renders the body afresh).
  let reading = null;
  const onProgress = (progress) => {
    if (shown !== base || thought !== baseThought || !(progress.total > 0)) return;
    if (!reading) {
      reading = document.createElement("p");
      reading.className = "reading";
      body.appendChild(reading);
    }
    const percent = Math.round(100 * progress.processed / progress.total);
    reading.textContent = `reading the conversation: ${percent} %`;
  };
  const meter = speedMeter();
  try {
    const read = $("poll").checked ? pollReply : streamReply;
    const reply = await read(onText, meter, genkey, controller, continuing, turn, onProgress,
      onThought);
    thought = baseThought + reply.reasoning;
    keepReply(continuing, base + reply.text, thought);
    onText(reply.text);
    setStatus(meter.final(reply.usage ? reply.usage.completion_tokens : 0));
    if (reply.usage) showContext(reply.usage.prompt_tokens + reply.usage.completion_tokens);
  } catch (error) {
    if (shown !== base || thought !== baseThought) keepReply(continuing, shown, thought);
    if (controller.signal.aborted) setStatus("Stopped.");
    else {
      notice(error instanceof TypeError ? "The server cannot be reached." : error.message);
      setStatus("");
    }
  } finally {
    if (reading) reading.remove();  // a reply that failed before its first text
    if (thought) showThought(turn, thought, false);
    setRunning(null);
  }
}
function keepReply(continuing, text, reasoning) {
  const list = messages();
  const reply = continuing ? list[list.length - 1] : {role: "assistant", content: ""};
  reply.content = text;
  if (reasoning) reply.reasoning = reasoning;
  if (!continuing) list.push(reply);
  touch();
}

async function send() {
  if (running) return;
  const images = await attachedImages();  // those still being read are waited for
  const sounds = attachedSounds();
  const text = $("prompt").value.trim();
  if ((!text && !images.length && !sounds.length) || running) return;
  if (editingIndex !== null) {
    // A branch: a new conversation with the turns before the edited one, then the edit.
    const source = conversation();
    const kept = source.messages.slice(0, editingIndex).map((m) => ({...m}));
    const branch = newConversation(`${source.title} (branch)`, kept);
    store.conversations.push(branch);
    store.current = branch.id;
    cancelEdit();
    render();
  }
  messages().push(withMedia({role: "user", content: text}, images, sounds));
  touch();
  showImages(addTurn("user", text, messages().length - 1), images, sounds);
  $("prompt").value = "";
  setAttachments([]);
  attachNotice("");
  generate();
}

// ---------------------------------------------------------------------------------------------
// Story mode: one text the model continues (KoboldAI's generate/stream), a memory sent first.

function loadStory() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORY_STORE) || "null");
    if (saved && typeof saved.text === "string") {
      return {memory: typeof saved.memory === "string" ? saved.memory : "", text: saved.text,
        undo: Array.isArray(saved.undo) ? saved.undo.filter((t) => typeof t === "string") : []};
    }
  } catch (_) { /* start afresh */ }
  return {memory: "", text: "", undo: []};
}
let story = loadStory();
function saveStory() { localStorage.setItem(STORY_STORE, JSON.stringify(story)); }

// KoboldAI's stream, asked for as resumable; the number of tokens it wrote.
async function storyStream(request, onText, meter, controller) {
  const {response, headersAfter} = await openStream("/api/extra/generate/stream",
    {...request, resumable: true}, controller, $("story"));
  const isEnd = (event) => {
    try { return event.event === "message" && Boolean(JSON.parse(event.data).finish_reason); }
    catch (_) { return false; }
  };
  let text = "", tokens = 0;
  const events = [];
  for await (const event of resumableEvents(response, controller, isEnd)) {
    events.push(event);
    const data = JSON.parse(event.data);
    if (event.event === "error") {
      throw new Error((data.detail && data.detail.msg) || "The stream broke.");
    }
    if (data.token) {
      text += data.token;
      tokens += 1;
      meter.tick();
      onText(text);
    }
    if (isEnd(event)) break;
  }
  // KoboldAI's events carry no timings: the server's own figures for the last generation.
  if (events.length >= 4 && !events.some((event) => event.resumed)) {
    const perf = await getJson("/api/extra/perf").catch(() => null);
    const timings = perf && {predicted_ms: perf.last_eval_time * 1000,
      prompt_ms: perf.last_process_time * 1000};
    if (lumpedStream(events, headersAfter, timings)) switchToPolling();
  }
  return tokens;
}
// The same continuation whole (/api/v1/generate), its text so far read meanwhile from
// /api/extra/generate/check by its genkey: for networks that hold streams back.
async function storyPoll(request, onText, meter, controller) {
  const finished = fetch("/api/v1/generate", {method: "POST", headers: headers(),
    body: JSON.stringify(request), signal: controller.signal});
  const answer = (await pollUntilDone(finished, request.genkey, controller, onText)).results[0];
  onText(answer.text);
  return answer.completion_tokens || 0;
}

// Continue: the model writes on. Retry: the last continuation is replaced by a new one.
async function storyContinue(retry) {
  if (running) return;
  story.text = $("story").value;
  story.memory = $("memory").value;
  if (retry) {
    if (!story.undo.length) return;
    story.text = story.undo[story.undo.length - 1];
  } else {
    story.undo.push(story.text);
    story.undo = story.undo.slice(-UNDO_DEPTH);
  }
  const base = story.text;
  $("story").value = base;
  saveStory();
  const genkey = "story-" + Math.random().toString(36).slice(2);
  const controller = new AbortController();
  setRunning({genkey, controller});
  setStatus("Generating…");
  const meter = speedMeter();
  let added = "", tokens = 0;
  const onText = (text) => {
    added = text;
    $("story").value = base + added;
    $("story").scrollTop = $("story").scrollHeight;
  };
  const request = {model: chosenModel(), prompt: base, memory: story.memory, genkey,
    max_length: Number($("max-tokens").value) || 200,
    temperature: Number($("temperature").value)};
  try {
    const read = $("poll").checked ? storyPoll : storyStream;
    tokens = await read(request, onText, meter, controller);
    setStatus(meter.final(tokens));
  } catch (error) {
    if (controller.signal.aborted) setStatus("Stopped.");
    else {
      setStatus(error instanceof TypeError ? "The server cannot be reached." : error.message);
    }
  } finally {
    story.text = base + added;
    // Nothing written: this continuation leaves no step to undo (a retry keeps its base).
    if (!added && !retry) story.undo.pop();
    saveStory();
    setRunning(null);
  }
  // KoboldAI's stream reports no usage: the server counts the prompt it was sent now.
  countStoryContext();
}
async function countStoryContext() {
  try {
    const response = await fetch("/api/extra/tokencount", {method: "POST", headers: headers(),
      body: JSON.stringify({prompt: story.memory + story.text})});
    if (response.ok) showContext((await response.json()).value);
  } catch (_) { /* the figure is a nicety */ }
}
function storyUndo() {
  if (running || !story.undo.length) return;
  story.text = story.undo.pop();
  $("story").value = story.text;
  saveStory();
  storyButtons();
  setStatus("");
}

// ---------------------------------------------------------------------------------------------
// Modes, the model picker, the sidebar.

function setMode(mode, reason = "") {
  document.body.dataset.mode = mode;
  $("mode-chat").setAttribute("aria-pressed", String(mode === "chat"));
  $("mode-story").setAttribute("aria-pressed", String(mode === "story"));
  $("mode-reason").textContent = reason;
  $("mode-reason").hidden = !reason;
}
function pickMode(mode) {
  if (running) return;
  modePicked = true;
  localStorage.setItem(MODE_STORE, mode);
  setMode(mode, mode === "story" && templateKnown === false ? BASE_MODEL : "");
}
// Whether the model has a chat template: /v1/models' meta for the chosen model, else /props
// (the loaded model's own template, "" when it has none), else KoboldCpp's `jinja` flag.
async function hasChatTemplate(model) {
  const meta = modelMeta[model];
  if (meta && typeof meta.chat_template === "boolean") return meta.chat_template;
  try {
    const props = await getJson("/props");
    if (typeof props.chat_template === "string") return props.chat_template !== "";
  } catch (_) { /* not there: ask the next */ }
  try {
    const version = await getJson("/api/extra/version");
    if (typeof version.jinja === "boolean") return version.jinja;
  } catch (_) { /* unknown */ }
  return null;
}
// The user's own choice (remembered) wins; otherwise a base model opens in Story mode.
async function chooseMode() {
  templateKnown = await hasChatTemplate(chosenModel() || "");
  const saved = localStorage.getItem(MODE_STORE);
  let mode;
  if (modePicked) mode = document.body.dataset.mode;
  else if (saved === "chat" || saved === "story") mode = saved;
  else mode = templateKnown === false ? "story" : "chat";
  setMode(mode, mode === "story" && templateKnown === false ? BASE_MODEL : "");
}

// The model picker: shown only when the server lists more than one model (--modeldir). The
// choice is remembered; a request naming another listed model makes the server switch to it.
async function loadModels() {
  const picker = $("model-picker"), select = $("model");
  try {
    const body = await getJson("/v1/models");
    const entries = (Array.isArray(body.data) ? body.data : [])
      .filter((entry) => entry && typeof entry.id === "string" && entry.id);
    const ids = entries.map((entry) => entry.id);
    modelMeta = Object.fromEntries(entries.map((entry) => [entry.id, entry.meta || null]));
    select.replaceChildren(...ids.map((id) => {
      const option = document.createElement("option");
      option.value = option.textContent = id;
      return option;
    }));
    // Unless the user chose one, the model serving now: opening the page switches nothing.
    const saved = localStorage.getItem(MODEL_STORE);
    const serving = ids.includes(saved) ? saved : await servingModel();
    if (ids.length) select.value = ids.includes(serving) ? serving : ids[0];
    picker.hidden = ids.length < 2;
    picker.dataset.state = "ready";
  } catch (_) {
    // No list: no picker, and requests name no model (the server's own model answers).
    select.replaceChildren();
    picker.hidden = true;
    picker.dataset.state = "failed";
  }
}
async function servingModel() {
  try {
    const perf = await getJson("/api/extra/perf");
    return typeof perf.model === "string" ? perf.model : null;
  } catch (_) {
    return null;
  }
}
function chosenModel() { return $("model").value || undefined; }
// The Think toggle shows for a model whose chat template thinks (/props' `thinking`); its
// setting is remembered (on unless turned off).
async function loadThinking() {
  let thinks = false;
  try { thinks = (await getJson("/props")).thinking === true; } catch (_) { /* no toggle */ }
  $("think-toggle").hidden = !thinks;
  $("think").checked = localStorage.getItem(THINK_STORE) !== "0";
}
async function loadContextSize() {
  try {
    const body = await getJson("/api/extra/true_max_context_length");
    if (Number.isInteger(body.value)) contextSize = body.value;
  } catch (_) { /* the figure shows without its size */ }
}

function setSidebar(open) {
  document.body.dataset.sidebar = open ? "open" : "closed";
  $("toggle-sidebar").setAttribute("aria-expanded", String(open));
}

// ---------------------------------------------------------------------------------------------
// Wiring.

$("send").onclick = send;
$("prompt").onkeydown = (event) => {
  if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(); }
};
$("cancel-edit").onclick = () => { cancelEdit(); $("prompt").value = ""; setAttachments([]); };
$("stop").onclick = async () => {
  if (!running) return;
  const {genkey, controller} = running;
  // Abort on the server first (by genkey, so only this reply stops), then stop reading.
  await fetch("/api/extra/abort", {method: "POST", headers: headers(),
    body: JSON.stringify({genkey})}).catch(() => {});
  controller.abort();
};
$("regenerate").onclick = () => {
  const list = messages();
  if (running || !list.length) return;
  if (list[list.length - 1].role === "assistant") { list.pop(); touch(); render(); }
  if (list.length) generate();
};
$("continue").onclick = () => {
  const list = messages();
  if (running || !list.length || list[list.length - 1].role !== "assistant") return;
  generate(true);
};
$("clear").onclick = () => {
  if (running) return;
  const empty = store.conversations.find((c) => !c.messages.length);
  const fresh = empty || newConversation();
  if (!empty) store.conversations.push(fresh);
  fresh.updated = Date.now();
  switchTo(fresh.id);
  setStatus("");
};
$("export").onclick = exportAll;
$("import").onchange = async () => {
  const file = $("import").files[0];
  $("import").value = "";
  if (!file || running) return;
  try {
    const count = importText(await file.text());
    sideNotice(`Imported ${count} conversation${count === 1 ? "" : "s"}.`, "ok");
  } catch (error) {
    sideNotice(error.message);
  }
};
$("toggle-sidebar").onclick = () => setSidebar(document.body.dataset.sidebar !== "open");
$("settings-toggle").onclick = () => {
  const open = $("settings").dataset.open !== "true";
  $("settings").dataset.open = String(open);
  $("settings-toggle").setAttribute("aria-expanded", String(open));
};
$("mode-chat").onclick = () => pickMode("chat");
$("mode-story").onclick = () => pickMode("story");
$("story-continue").onclick = () => storyContinue(false);
$("story-retry").onclick = () => storyContinue(true);
$("story-undo").onclick = storyUndo;
$("story").oninput = () => { story.text = $("story").value; saveStory(); };
$("story").onkeydown = (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    storyContinue(false);
  }
};
// On a narrow screen the sidebar lies over the page: a tap beside it closes it.
$("main").addEventListener("click", (event) => {
  if (document.body.dataset.sidebar === "open" && event.target !== $("toggle-sidebar")
      && window.matchMedia("(max-width: 700px)").matches) setSidebar(false);
});
$("memory").oninput = () => { story.memory = $("memory").value; saveStory(); };
$("poll").onchange = () => localStorage.setItem(POLL_STORE, $("poll").checked ? "1" : "0");
$("think").onchange = () => localStorage.setItem(THINK_STORE, $("think").checked ? "1" : "0");
$("model").onchange = () => {
  localStorage.setItem(MODEL_STORE, $("model").value);
  chooseMode();  // the mode stays; only the line saying why is for the new model
  loadModalities();
};
wireImages();

setSidebar(!window.matchMedia("(max-width: 700px)").matches);
$("story").value = story.text;
$("memory").value = story.memory;
$("poll").checked = localStorage.getItem(POLL_STORE) === "1";
if (story.memory) $("memory-box").open = true;
renderList();
render();
storyButtons();
// Ready once the models are known and the mode is chosen (the tests wait for this too).
Promise.all([loadModels().then(loadModalities), loadContextSize(), loadThinking()])
  .then(chooseMode).finally(() => { document.body.dataset.ready = "true"; });
