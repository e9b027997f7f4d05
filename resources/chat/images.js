"use strict";
// Images and sounds in the chat page, for a model with a projector (Hearth's --mmproj): attached
// with the attach button, pasted into the prompt or dropped on the page; shown above the prompt
// and in the user's turn; stored with the conversation (localStorage) and sent as OpenAI
// `image_url` and `input_audio` parts. Loaded before chat.js, whose functions (button,
// messages, ...) these call only once the page runs; nothing here runs on load.
//
// Each image is kept as a data: URI, made small first: the browser's storage holds a few
// megabytes for the whole page, and the model scales every image to a few hundred pixels a
// side anyway. Thumbnails are <img> elements given that URI by the page itself, checked to be
// a raster image (never markup: no SVG), which the Content-Security-Policy allows (img-src
// data:); model output never becomes an image (see renderMarkdown in chat.js).
//
// A sound (WAV, MP3 or FLAC, for a projector that takes audio) is a chip with its file name:
// the page plays nothing (no <audio>: the Content-Security-Policy has no media-src). A sound
// cannot be made smaller without re-encoding it, so one over KEEP_SOUND_BYTES keeps its data
// only while the page is open: the stored conversation keeps its name, marked as not kept
// (see soundClip), and later requests leave it out, saying so.

const MAX_IMAGES = 8;  // images and sounds per message, and per request (the server's limit)
const MAX_SIDE = 1024;  // the longest side of a stored image, in pixels
// An image already this small (and in a format the server reads) is kept as it came: a
// screenshot stays sharp. Larger ones are redrawn: PNG when that stays this small or the
// image has transparency, else JPEG.
const KEEP_BYTES = 256 * 1024;
const JPEG_QUALITY = 0.85;
const SENT_TYPES = ["image/png", "image/jpeg", "image/gif", "image/bmp"];
const STORED_IMAGE = /^data:image\/(?:png|jpeg|gif|bmp);base64,[A-Za-z0-9+/]+={0,2}$/;
// Sounds: stored with the conversation up to KEEP_SOUND_BYTES (a few seconds of WAV; a minute
// of MP3), sent up to the server's limit for one sound.
const KEEP_SOUND_BYTES = 256 * 1024;
const MAX_SOUND_BYTES = 25 * 1024 * 1024;
const SOUND_FORMATS = ["wav", "mp3", "flac"];  // as OpenAI's input_audio `format` names them
const SOUND_NAME = /\.(?:wav|mp3|flac)$/i;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
let seesImages = null;  // whether the chosen model takes images (null: unknown)
let hearsSounds = null;  // whether it takes sounds (null: unknown)
// The images and sounds for the next message: {url} for an image, {clip} for a sound (see
// soundClip); both null while the file is being read.
let attached = [];

// The images of a stored or imported message: data: URIs of raster images only.
function storedImages(list) {
  if (!Array.isArray(list)) return [];
  return list.filter((url) => typeof url === "string" && STORED_IMAGE.test(url))
    .slice(0, MAX_IMAGES);
}
// The sounds of a stored or imported message: {name, format, data} (data absent when it was
// not kept), anything else dropped.
function storedSounds(list) {
  if (!Array.isArray(list)) return [];
  return list.filter((clip) => clip && typeof clip.name === "string"
    && SOUND_FORMATS.includes(clip.format)
    && (clip.data === undefined || (typeof clip.data === "string" && BASE64.test(clip.data))))
    .slice(0, MAX_IMAGES).map((clip) => soundClip(clip.name, clip.format, clip.data));
}
// A sound as a message holds it. Stored (JSON.stringify: the conversations, an export) it
// keeps its data only when small; a larger one keeps its name and `kept: false`.
function soundClip(name, format, data) {
  const clip = {name: name.slice(0, 200), format};
  if (data) clip.data = data;
  Object.defineProperty(clip, "toJSON", {value: storedClip});
  return clip;
}
function storedClip() {
  // base64 takes 4 characters for 3 bytes.
  if (this.data && this.data.length <= KEEP_SOUND_BYTES * 4 / 3) {
    return {name: this.name, format: this.format, data: this.data};
  }
  return {name: this.name, format: this.format, kept: false};
}
// A user message with its images and sounds, each field only when it has some.
function withMedia(message, images, sounds) {
  if (images.length) message.images = images;
  if (sounds.length) message.audio = sounds;
  return message;
}

// ---------------------------------------------------------------------------------------------
// What the model takes: the chosen model's capabilities (Ollama's /api/show names "vision"
// and "audio") when the server lists several, else /props' `modalities` for the one it serves.
// The attach button shows for either, named for what it takes.

async function loadModalities() {
  ({vision: seesImages, audio: hearsSounds} = await modelTakes(chosenModel()));
  const input = document.getElementById("attach-input");
  const accepted = [];
  if (seesImages === true) accepted.push("image/*");
  if (hearsSounds === true) accepted.push(".wav,.mp3,.flac,audio/wav,audio/mpeg,audio/flac");
  input.accept = accepted.join(",");
  const both = seesImages === true && hearsSounds === true;
  document.getElementById("attach-label").textContent = both ? "Attach"
    : hearsSounds === true ? "Sound" : "Image";
  const attach = document.getElementById("attach");
  const what = both ? "images or sounds (WAV, MP3, FLAC)"
    : hearsSounds === true ? "sounds (WAV, MP3, FLAC)" : "images";
  attach.title = `Attach ${what} (or paste them into the prompt, or drop them on the page)`;
  attach.hidden = !accepted.length;
}
async function modelTakes(model) {
  if (model && document.getElementById("model").options.length > 1) {
    try {
      const response = await fetch("/api/show", {method: "POST", headers: headers(),
        body: JSON.stringify({model})});
      if (response.ok) {
        const capabilities = (await response.json()).capabilities || [];
        return {vision: capabilities.includes("vision"), audio: capabilities.includes("audio")};
      }
    } catch (_) { /* ask /props */ }
  }
  try {
    const modalities = (await getJson("/props")).modalities || {};
    const known = (value) => (typeof value === "boolean" ? value : null);
    return {vision: known(modalities.vision), audio: known(modalities.audio)};
  } catch (_) { /* unknown */ }
  return {vision: null, audio: null};
}

// ---------------------------------------------------------------------------------------------
// Attaching: files from the button, the clipboard or a drop, read one by one.

function isSound(file) {
  return (file.type || "").startsWith("audio/") || SOUND_NAME.test(file.name || "");
}
function attachFiles(files) {
  const list = [...files];
  if (!list.length) return;
  const wanted = list.filter((file) => (isSound(file) ? hearsSounds : seesImages) === true);
  const refused = list.find((file) => !wanted.includes(file));
  const room = MAX_IMAGES - attached.length;
  const what = hearsSounds === true ? "images or sounds" : "images";
  if (wanted.length > room) {
    attachNotice(`At most ${MAX_IMAGES} ${what} go with a message: `
      + `${wanted.length - Math.max(room, 0)} left out.`);
  } else if (refused) {
    attachNotice(isSound(refused)
      ? "This model does not take sounds: it needs an audio projector (Hearth's --mmproj)."
      : "This model does not take images: it needs a projector (Hearth's --mmproj).");
  } else {
    attachNotice("");
  }
  for (const file of wanted.slice(0, Math.max(room, 0))) addFile(file);
}
function addFile(file) {
  const slot = isSound(file) ? {clip: null} : {url: null};
  const reading = "clip" in slot
    ? readSound(file).then((clip) => { slot.clip = clip; })
    : readImage(file).then((url) => { slot.url = url; });
  slot.ready = reading.catch((error) => {
    attached = attached.filter((other) => other !== slot);
    attachNotice(error.message);
  }).finally(renderAttachments);
  attached.push(slot);
  renderAttachments();
}
// Waits for the images and sounds still being read; the images' data: URIs, in the order
// attached (attachedSounds then has the sounds).
async function attachedImages() {
  await Promise.all(attached.map((slot) => slot.ready));
  return attached.map((slot) => slot.url).filter(Boolean);
}
function attachedSounds() {
  return attached.map((slot) => slot.clip).filter(Boolean);
}
// What an edited message puts back above the prompt: its images, and its sounds still held.
function setAttachments(urls, sounds = []) {
  const held = sounds.filter((clip) => clip.data);
  attached = [...urls.map((url) => ({url})), ...held.map((clip) => ({clip}))];
  attached.forEach((slot) => { slot.ready = Promise.resolve(); });
  if (held.length < sounds.length) {
    attachNotice("Sounds that were not stored (too large to keep) are not attached again: "
      + "attach them anew.");
  }
  renderAttachments();
}
function attachNotice(text) {
  const line = document.getElementById("attach-notice");
  line.textContent = text;
  line.hidden = !text;
}

// A file as a data: URI the server reads and the page can store (see KEEP_BYTES).
async function readImage(file) {
  const name = file.name || "The pasted image";
  let bitmap;
  try {
    bitmap = await createImageBitmap(file);
  } catch (_) {
    throw new Error(`${name}: not an image this browser can read (PNG, JPEG, GIF, BMP and `
      + "WebP are).");
  }
  try {
    const scale = Math.min(1, MAX_SIDE / Math.max(bitmap.width, bitmap.height));
    if (scale === 1 && SENT_TYPES.includes(file.type) && file.size <= KEEP_BYTES) {
      return await fileUrl(file);
    }
    return redrawn(bitmap, scale);
  } finally {
    bitmap.close();
  }
}
function fileUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(new Error(`${file.name || "The file"} could not be read.`));
    reader.readAsDataURL(file);
  });
}
function redrawn(bitmap, scale) {
  const canvas = document.createElement("canvas");
  canvas.width = Math.max(1, Math.round(bitmap.width * scale));
  canvas.height = Math.max(1, Math.round(bitmap.height * scale));
  const context = canvas.getContext("2d", {willReadFrequently: true});
  context.imageSmoothingQuality = "high";
  context.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  const png = canvas.toDataURL("image/png");
  // base64 takes 4 characters for 3 bytes.
  if (png.length <= KEEP_BYTES * 4 / 3 || transparent(context, canvas)) return png;
  return canvas.toDataURL("image/jpeg", JPEG_QUALITY);
}
function transparent(context, canvas) {
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] < 255) return true;
  return false;
}

// A sound file as a clip: its format from its first bytes (what the server checks too, so a
// mislabelled file is named here), its bytes as base64, as OpenAI's input_audio takes them.
async function readSound(file) {
  const name = file.name || "The sound";
  if (file.size > MAX_SOUND_BYTES) {
    throw new Error(`${name}: a sound of at most ${MAX_SOUND_BYTES / 1024 / 1024} MB is `
      + "taken.");
  }
  const format = soundFormat(new Uint8Array(await file.slice(0, 12).arrayBuffer()));
  if (!format) throw new Error(`${name}: not a sound this page sends (WAV, MP3 or FLAC).`);
  const url = await fileUrl(file);
  return soundClip(name, format, url.slice(url.indexOf(",") + 1));
}
function soundFormat(head) {
  const text = String.fromCharCode(...head);
  if (text.startsWith("RIFF") && text.slice(8, 12) === "WAVE") return "wav";
  if (text.startsWith("fLaC")) return "flac";
  // An ID3 tag, or an MPEG audio frame's 11 sync bits.
  if (text.startsWith("ID3") || (head[0] === 0xFF && (head[1] & 0xE0) === 0xE0)) return "mp3";
  return null;
}

// ---------------------------------------------------------------------------------------------
// Showing them: the tray above the prompt, and the user's turns.

function renderAttachments() {
  const tray = document.getElementById("attachments");
  tray.replaceChildren(...attached.map(attachment));
  tray.hidden = !attached.length;
}
function attachment(slot, index) {
  const item = document.createElement("span");
  item.className = "attachment";
  if (slot.url) item.appendChild(thumbnail(slot.url, `Attached image ${index + 1}`));
  else if (slot.clip) item.appendChild(soundChip(slot.clip));
  else item.appendChild(Object.assign(document.createElement("span"),
    {className: "reading", textContent: "reading…"}));
  const remove = button("×", "remove", () => {
    attached = attached.filter((other) => other !== slot);
    renderAttachments();
  });
  remove.title = "Remove";
  remove.setAttribute("aria-label", `Remove ${slot.clip ? slot.clip.name : `image ${index + 1}`}`);
  item.appendChild(remove);
  return item;
}
function thumbnail(url, alt) {
  const image = document.createElement("img");
  image.src = url;  // a data: URI checked by STORED_IMAGE or made by redrawn/fileUrl
  image.alt = alt;
  image.onclick = () => image.classList.toggle("large");
  return image;
}
// A sound as a chip: its file name (as text: a name is the user's, never markup), and a note
// when its data was not kept.
function soundChip(clip) {
  const chip = document.createElement("span");
  chip.className = "sound";
  chip.textContent = `♪ ${clip.name}`;
  if (!clip.data) {
    chip.dataset.kept = "false";
    chip.title = "Too large to store with the conversation: no longer sent.";
    chip.textContent += " (not kept)";
  }
  return chip;
}
function showImages(turn, images, sounds) {
  const clips = storedSounds(sounds);
  if (!(images && images.length) && !clips.length) return;
  const strip = document.createElement("div");
  strip.className = "images";
  (images || []).forEach((url, index) => strip.appendChild(thumbnail(url, `Image ${index + 1}`)));
  clips.forEach((clip) => strip.appendChild(soundChip(clip)));
  turn.insertBefore(strip, turn.querySelector(".body"));
}

// ---------------------------------------------------------------------------------------------
// Sending them: each message's content, with its images and sounds as OpenAI parts. Earlier
// turns send theirs again (the server's prompt cache knows them by their hash, so this costs
// little). A request takes at most MAX_IMAGES: the latest go, older ones are left out, and so
// are all images for a model known not to see, all sounds for one known not to hear, and the
// sounds whose data was not kept.

function requestContents(list) {
  const contents = list.map((m) => m.content);
  const left = {older: 0, images: 0, sounds: 0, gone: 0};
  let room = MAX_IMAGES;
  for (let i = list.length - 1; i >= 0; i -= 1) {
    const parts = mediaParts(list[i], left);
    const kept = parts.slice(Math.max(0, parts.length - room));
    room -= kept.length;
    left.older += parts.length - kept.length;
    if (kept.length) contents[i] = (list[i].content ? [{type: "text", text: list[i].content}]
      : []).concat(kept);
  }
  const said = leftOut(left, list.some((m) => m.audio && m.audio.length));
  if (said) attachNotice(said);
  return contents;
}
// A message's media as parts, counting in `left` those that cannot go.
function mediaParts(message, left) {
  const images = message.images || [];
  const clips = storedSounds(message.audio);
  const held = clips.filter((clip) => clip.data);
  left.gone += clips.length - held.length;
  const parts = [];
  if (seesImages === false) left.images += images.length;
  else parts.push(...images.map((url) => ({type: "image_url", image_url: {url}})));
  if (hearsSounds === false) left.sounds += held.length;
  else {
    parts.push(...held.map((clip) => ({type: "input_audio",
      input_audio: {data: clip.data, format: clip.format}})));
  }
  return parts;
}
function leftOut(left, withSounds) {
  const lines = [];
  if (left.images) {
    lines.push("This model does not take images: the conversation's images were left out.");
  }
  if (left.sounds) {
    lines.push("This model does not take sounds: the conversation's sounds were left out.");
  }
  if (left.gone) {
    lines.push(`${left.gone} sound${left.gone === 1 ? " was" : "s were"} too large to store `
      + "and no longer held by the page: left out.");
  }
  if (left.older) {
    lines.push(`A request takes at most ${MAX_IMAGES} ${withSounds ? "images or sounds"
      : "images"}: ${left.older} older one${left.older === 1 ? " was" : "s were"} left out.`);
  }
  return lines.join(" ");
}

// ---------------------------------------------------------------------------------------------
// Wiring: called by chat.js once the page is set up.

function wireImages() {
  const input = document.getElementById("attach-input");
  input.onchange = () => {
    const files = [...input.files];
    input.value = "";
    attachFiles(files);
  };
  // Text pastes as ever; images (a screenshot, "Copy image") and sounds on the clipboard
  // are attached.
  document.getElementById("prompt").addEventListener("paste", (event) => {
    const files = [...(event.clipboardData ? event.clipboardData.files : [])];
    if (files.length) attachFiles(files);
  });
  document.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();  // else the browser would open the file in place of the page
    document.body.dataset.dropping = String(document.body.dataset.mode === "chat");
  });
  document.addEventListener("dragleave", (event) => {
    if (event.relatedTarget === null) delete document.body.dataset.dropping;
  });
  document.addEventListener("drop", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    delete document.body.dataset.dropping;
    if (document.body.dataset.mode === "chat") attachFiles(event.dataTransfer.files);
  });
}
function carriesFiles(event) {
  return Boolean(event.dataTransfer) && [...event.dataTransfer.types].includes("Files");
}
