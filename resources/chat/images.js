"use strict";
// Images in the chat page, for a model with a projector (Hearth's --mmproj): attached with the
// Image button, pasted into the prompt or dropped on the page; shown as thumbnails above the
// prompt and in the user's turn; stored with the conversation (localStorage) and sent as
// OpenAI `image_url` parts. Loaded before chat.js, whose functions (button, messages, ...)
// these call only once the page runs; nothing here runs on load.
//
// Each image is kept as a data: URI, made small first: the browser's storage holds a few
// megabytes for the whole page, and the model scales every image to a few hundred pixels a
// side anyway. Thumbnails are <img> elements given that URI by the page itself, checked to be
// a raster image (never markup: no SVG), which the Content-Security-Policy allows (img-src
// data:); model output never becomes an image (see renderMarkdown in chat.js).

const MAX_IMAGES = 8;  // per message, and per request (the server's limit, as KoboldCpp's)
const MAX_SIDE = 1024;  // the longest side of a stored image, in pixels
// An image already this small (and in a format the server reads) is kept as it came: a
// screenshot stays sharp. Larger ones are redrawn: PNG when that stays this small or the
// image has transparency, else JPEG.
const KEEP_BYTES = 256 * 1024;
const JPEG_QUALITY = 0.85;
const SENT_TYPES = ["image/png", "image/jpeg", "image/gif", "image/bmp"];
const STORED_IMAGE = /^data:image\/(?:png|jpeg|gif|bmp);base64,[A-Za-z0-9+/]+={0,2}$/;
let seesImages = null;  // whether the chosen model takes images (null: unknown)
let attached = [];  // the images for the next message: {url}, url null while being read

// The images of a stored or imported message: data: URIs of raster images only.
function storedImages(list) {
  if (!Array.isArray(list)) return [];
  return list.filter((url) => typeof url === "string" && STORED_IMAGE.test(url))
    .slice(0, MAX_IMAGES);
}

// ---------------------------------------------------------------------------------------------
// Whether the model sees: the chosen model's capabilities (Ollama's /api/show names "vision")
// when the server lists several, else /props' `modalities` for the one it serves.

async function loadVision() {
  seesImages = await modelSees(chosenModel());
  document.getElementById("attach").hidden = seesImages !== true;
}
async function modelSees(model) {
  if (model && document.getElementById("model").options.length > 1) {
    try {
      const response = await fetch("/api/show", {method: "POST", headers: headers(),
        body: JSON.stringify({model})});
      if (response.ok) return ((await response.json()).capabilities || []).includes("vision");
    } catch (_) { /* ask /props */ }
  }
  try {
    const modalities = (await getJson("/props")).modalities;
    if (modalities && typeof modalities.vision === "boolean") return modalities.vision;
  } catch (_) { /* unknown */ }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Attaching: files from the button, the clipboard or a drop, read one by one.

function attachFiles(files) {
  const list = [...files];
  if (!list.length) return;
  if (seesImages !== true) {
    attachNotice("This model does not take images: it needs a projector (Hearth's --mmproj).");
    return;
  }
  const room = MAX_IMAGES - attached.length;
  attachNotice(list.length > room
    ? `At most ${MAX_IMAGES} images go with a message: ${list.length - Math.max(room, 0)} `
      + "left out." : "");
  for (const file of list.slice(0, Math.max(room, 0))) addImage(file);
}
function addImage(file) {
  const slot = {url: null};
  slot.ready = readImage(file).then((url) => { slot.url = url; }, (error) => {
    attached = attached.filter((other) => other !== slot);
    attachNotice(error.message);
  }).finally(renderAttachments);
  attached.push(slot);
  renderAttachments();
}
// Waits for the images still being read; their data: URIs, in the order attached.
async function attachedImages() {
  await Promise.all(attached.map((slot) => slot.ready));
  return attached.map((slot) => slot.url).filter(Boolean);
}
function setAttachments(urls) {
  attached = urls.map((url) => ({url, ready: Promise.resolve()}));
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
    reader.onerror = () => reject(new Error(`${file.name || "The image"} could not be read.`));
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
  else item.appendChild(Object.assign(document.createElement("span"),
    {className: "reading", textContent: "reading…"}));
  const remove = button("×", "remove", () => {
    attached = attached.filter((other) => other !== slot);
    renderAttachments();
  });
  remove.title = "Remove";
  remove.setAttribute("aria-label", `Remove image ${index + 1}`);
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
function showImages(turn, images) {
  if (!images || !images.length) return;
  const strip = document.createElement("div");
  strip.className = "images";
  images.forEach((url, index) => strip.appendChild(thumbnail(url, `Image ${index + 1}`)));
  turn.insertBefore(strip, turn.querySelector(".body"));
}

// ---------------------------------------------------------------------------------------------
// Sending them: each message's content, with its images as OpenAI parts. Earlier turns send
// theirs again (the server's prompt cache knows them by their hash, so this costs little). A
// request takes at most MAX_IMAGES: the latest go, older ones are left out, and so are all of
// them for a model known not to see.

function requestContents(list) {
  let room = seesImages === false ? 0 : MAX_IMAGES, left = 0;
  const contents = list.map((m) => m.content);
  for (let i = list.length - 1; i >= 0; i -= 1) {
    const images = list[i].images || [];
    const kept = images.slice(Math.max(0, images.length - room));
    room -= kept.length;
    left += images.length - kept.length;
    if (kept.length) contents[i] = contentParts(list[i].content, kept);
  }
  if (left) {
    attachNotice(seesImages === false ? "This model does not take images: the conversation's "
      + "images were left out." : `A request takes at most ${MAX_IMAGES} images: ${left} `
      + `older one${left === 1 ? " was" : "s were"} left out.`);
  }
  return contents;
}
function contentParts(text, images) {
  const parts = text ? [{type: "text", text}] : [];
  return parts.concat(images.map((url) => ({type: "image_url", image_url: {url}})));
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
  // Text pastes as ever; images on the clipboard (a screenshot, "Copy image") are attached.
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
