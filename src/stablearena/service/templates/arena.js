// The /arena page: stream a battle's two answers, open the votes when both are complete,
// reveal the names after the vote. Served as a file (the page's CSP allows only this site's
// scripts); posts carry the CSRF token of the page's identity.
//
// Answers are Markdown (CommonMark + tables), rendered as they stream: markdown-it with raw HTML
// off (an answer's HTML stays text), fenced code highlighted by highlight.js, $…$ / $$…$$ /
// \(…\) / \[…\] math by KaTeX as MathML (no fonts), and everything through DOMPurify before it
// reaches the page. Links only to http(s)/mailto; images become links (nothing is fetched from
// elsewhere). The vendored libraries: static/vendor/README.md. While streaming, a side renders at
// most once per animation frame: the completed blocks once (appended), the open last block again.
import hljs from "/arena/vendor/highlight.js-11.12.0/core.min.js";

// KaTeX and each highlighted language load on first use (most answers need neither, and
// KaTeX is 40% of the page's weight); until then math shows as its source, code unhighlighted,
// and both sides re-render once it has loaded. body[data-loading]: how many loads are pending.
var VENDOR = "/arena/vendor/";
var LANGS = { python: "python", py: "python", javascript: "javascript", js: "javascript",
  typescript: "typescript", ts: "typescript", bash: "bash", sh: "bash", shell: "bash",
  zsh: "bash", json: "json", sql: "sql", c: "c", h: "c", cpp: "cpp", "c++": "cpp", java: "java",
  go: "go", golang: "go", rust: "rust", rs: "rust", xml: "xml", html: "xml", svg: "xml",
  css: "css", yaml: "yaml", yml: "yaml" };
var asked = {}, pending = 0;
function loading(n) {
  pending += n; document.body.dataset.loading = String(pending);
  if (n < 0) { Object.keys(sides).forEach(function (s) { sides[s].repaint(); }); }
}
function want(name, load) {
  if (asked[name]) { return; }
  asked[name] = true; loading(1);
  load().catch(function () { /* left as it is: source text */ }).finally(function () { loading(-1); });
}
function wantKatex() {
  want("katex", function () {
    return new Promise(function (ok, fail) {
      var el = document.createElement("script");
      el.src = VENDOR + "katex-0.16.47/katex.min.js";
      el.onload = ok; el.onerror = fail;
      document.head.appendChild(el);
    });
  });
}
function wantLanguage(name) {
  want(name, function () {
    return import(VENDOR + "highlight.js-11.12.0/languages/" + name + ".min.js")
      .then(function (m) { hljs.registerLanguage(name, m.default); });
  });
}

// ------------------------------------------------------------------------- Markdown renderer
var SAFE_URL = /^(https?:|mailto:|#|\/(?!\/))/i;

function mathInline(state, silent) {
  var src = state.src, pos = state.pos, max = state.posMax, open, close, end;
  if (src.charCodeAt(pos) === 0x5c /* \ */ && src[pos + 1] === "(") {
    end = src.indexOf("\\)", pos + 2);
    if (end < 0 || end >= max) { return false; }
    open = pos + 2; close = end; end += 2;
  } else if (src[pos] === "$" && src[pos + 1] !== "$") {
    open = pos + 1;
    if (open >= max || /\s/.test(src[open])) { return false; }
    close = open;
    for (;;) {
      close = src.indexOf("$", close);
      if (close < 0 || close >= max) { return false; }
      if (src[close - 1] !== "\\") { break; }
      close += 1;
    }
    if (/\s/.test(src[close - 1]) || /\d/.test(src[close + 1] || "")) { return false; }
    end = close + 1;
  } else { return false; }
  if (!silent) { state.push("math_inline", "math", 0).content = src.slice(open, close); }
  state.pos = end;
  return true;
}

function mathBlock(state, startLine, endLine, silent) {
  var pos = state.bMarks[startLine] + state.tShift[startLine], max = state.eMarks[startLine];
  if (state.sCount[startLine] - state.blkIndent >= 4) { return false; }
  var first = state.src.slice(pos, max).trim(), closer;
  if (first.slice(0, 2) === "$$") { closer = "$$"; }
  else if (first.slice(0, 2) === "\\[") { closer = "\\]"; }
  else { return false; }
  if (silent) { return true; }
  var body = first.slice(2), line = startLine, found = false;
  if (body.length >= 2 && body.slice(-2) === closer) { body = body.slice(0, -2); found = true; }
  while (!found && ++line < endLine) {
    var text = state.src.slice(state.bMarks[line] + state.tShift[line], state.eMarks[line]);
    if (state.sCount[line] < state.blkIndent && text) { break; }
    if (text.trim().slice(-2) === closer) { body += "\n" + text.trim().slice(0, -2); found = true; }
    else { body += "\n" + text; }
  }
  var tok = state.push("math_block", "math", 0);
  tok.block = true; tok.content = body; tok.meta = { open: !found };
  tok.map = [startLine, found ? line + 1 : line];
  state.line = found ? line + 1 : line;
  return true;
}

var texCache = new Map();  // a formula is typeset once, not again on every streamed token
function tex(content, display) {
  if (typeof katex === "undefined") { wantKatex(); return null; }
  var key = (display ? "D" : "I") + content, out = texCache.get(key);
  if (out !== undefined) { return out; }
  try {
    out = katex.renderToString(content, { displayMode: display, output: "mathml",
      throwOnError: false, trust: false, maxSize: 50, maxExpand: 500 });
  } catch (e) { out = null; }
  if (texCache.size > 2000) { texCache.clear(); }
  texCache.set(key, out);
  return out;
}

function escape(s) {
  return s.replace(/[&<>"']/g, function (ch) {
    return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch];
  });
}

var md = markdownit({
  html: false, linkify: false, typographer: false,
  highlight: function (code, lang) {
    lang = LANGS[(lang || "").toLowerCase()];
    if (lang && !hljs.getLanguage(lang)) { wantLanguage(lang); }
    if (lang && hljs.getLanguage(lang)) {
      try { return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value; }
      catch (e) { return ""; }
    }
    return "";
  }
});
md.validateLink = function (url) { return SAFE_URL.test(url.trim()); };
md.inline.ruler.before("escape", "math_inline", mathInline);
md.block.ruler.before("fence", "math_block", mathBlock,
  { alt: ["paragraph", "reference", "blockquote", "list"] });
md.renderer.rules.math_inline = function (tokens, i) {
  return tex(tokens[i].content, false) || "<code>" + escape(tokens[i].content) + "</code>";
};
md.renderer.rules.math_block = function (tokens, i) {
  var t = tokens[i], out = t.meta.open ? null : tex(t.content, true);
  return out ? '<div class="math-display">' + out + "</div>\n"
    : "<pre><code>" + escape(t.content) + "</code></pre>\n";
};
// a table column's alignment as a class (style attributes are not let through: no answer styles the page)
md.core.ruler.push("align_class", function (state) {
  state.tokens.forEach(function (t) {
    var m = (t.type === "th_open" || t.type === "td_open") && /text-align:(\w+)/.exec(t.attrGet("style") || "");
    if (m) { t.attrs = t.attrs.filter(function (a) { return a[0] !== "style"; }); t.attrJoin("class", "align-" + m[1]); }
  });
});
// an image is shown as a link to it: nothing is fetched from elsewhere by reading an answer
md.renderer.rules.image = function (tokens, i) {
  var t = tokens[i], alt = t.children ? md.renderer.renderInlineAsText(t.children, md.options) : "";
  return '<a href="' + escape(t.attrGet("src")) + '">[image: ' + escape(alt || "untitled") + "]</a>";
};

var PURIFY = {
  USE_PROFILES: { html: true, mathMl: true },
  FORBID_TAGS: ["style", "img", "svg", "iframe", "form", "input", "button", "textarea", "select"],
  FORBID_ATTR: ["style", "id", "name", "srcset", "action", "formaction"]
};
DOMPurify.addHook("afterSanitizeAttributes", function (node) {
  if (node.hasAttribute && node.hasAttribute("href")) {
    if (!SAFE_URL.test(node.getAttribute("href").trim())) { node.removeAttribute("href"); }
    else { node.setAttribute("rel", "noopener noreferrer nofollow"); node.setAttribute("target", "_blank"); }
  }
  if (node.hasAttribute && node.hasAttribute("src")) { node.removeAttribute("src"); }
});

function render(text) { return DOMPurify.sanitize(md.render(text), PURIFY); }

// Where the completed blocks end: after the last blank line that is outside a fence or a
// display formula and followed by an unindented line (the rest is the open block).
function settled(text, from) {
  var fence = null, math = null, cut = from, pos = from, blank = false;
  while (pos < text.length) {
    var nl = text.indexOf("\n", pos);
    if (nl < 0) { break; }  // the last line is still streaming
    var line = text.slice(pos, nl), t = line.trim();
    if (fence) {
      if (t.indexOf(fence) === 0 && /^[`~]+$/.test(t)) { fence = null; }
    } else if (math) {
      if (t.slice(-2) === math) { math = null; }
    } else if (!t) {
      blank = true;
    } else {
      if (blank && !/^\s/.test(line)) { cut = pos; }
      blank = false;
      var f = /^ {0,3}(`{3,}|~{3,})/.exec(line);
      if (f) { fence = f[1]; }
      else if (/^ {0,3}(\$\$|\\\[)/.test(line)) {
        var closer = t.slice(0, 2) === "$$" ? "$$" : "\\]";
        if (!(t.length > 2 && t.slice(-2) === closer)) { math = closer; }
      }
    }
    pos = nl + 1;
  }
  return cut;
}

// ------------------------------------------------------------------------------- the page
// Modes (tabs): "battle" — two anonymous models drawn by the arena, the names revealed after the
// vote; "named" — side by side, the two models the visitor picked (named from the start; the vote
// is kept but not on the board, and the answer says so); "chat" — one model picked by name, no
// vote. body[data-mode] says which; switching ends the conversation on the screen as New does.
var csrf = document.querySelector('meta[name="csrf-token"]').content;
var $ = function (id) { return document.getElementById(id); };
var prompt = $("prompt"), send = $("send"), again = $("again"), status = $("status");
var suggest = $("suggest");
var votes = Array.prototype.slice.call(document.querySelectorAll("button.vote"));
var battle = null, promptId = null, voted = false;
var mode = "battle", pickA = $("pick-a"), pickB = $("pick-b"), tabs = Array.prototype.slice.call(document.querySelectorAll(".modes button"));
var share = $("share"), shared = $("shared"), shareLink = $("share-link");
var copies = Array.prototype.slice.call(document.querySelectorAll("#turn-current button.copy"));
// a touch screen (the page hides its keyboard hints there; a headless or keyboard-only browser,
// with no pointer at all, keeps them)
var touch = window.matchMedia("(pointer: coarse)").matches;
// render cost, for the guide's figures and the browser tests: ms and calls per side
var cost = window.arenaRenderCost = { a: { ms: 0, calls: 0 }, b: { ms: 0, calls: 0 } };

function Side(s) {
  var el = $("answer-" + s);
  this.s = s; this.el = el; this.text = ""; this.cut = 0; this.frame = 0;
  this.done = document.createElement("div"); this.tail = document.createElement("div");
  // where the side stands before its answer starts (queued for the model's free slot)
  this.note = document.createElement("p"); this.note.className = "line-state"; this.note.hidden = true;
  el.replaceChildren(this.note, this.done, this.tail);
}
Side.prototype.tell = function (text) { this.note.textContent = text; this.note.hidden = !text; };
Side.prototype.clear = function () {
  if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
  this.text = ""; this.cut = 0; this.done.replaceChildren(); this.tail.replaceChildren(); this.tell("");
};
Side.prototype.add = function (delta) {
  if (!this.note.hidden) { this.tell(""); }
  this.text += delta;
  var self = this;
  if (!this.frame) { this.frame = requestAnimationFrame(function () { self.frame = 0; self.paint(); }); }
};
Side.prototype.paint = function () {
  var t0 = performance.now(), cut = settled(this.text, this.cut);
  if (cut > this.cut) {
    this.done.insertAdjacentHTML("beforeend", render(this.text.slice(this.cut, cut)));
    this.cut = cut;
  }
  this.tail.innerHTML = render(this.text.slice(this.cut));
  cost[this.s].ms += performance.now() - t0; cost[this.s].calls += 1;
};
Side.prototype.repaint = function () {  // after a library loaded: everything again
  if (!this.text) { return; }
  var t0 = performance.now();
  this.done.innerHTML = render(this.text.slice(0, this.cut));
  this.tail.innerHTML = render(this.text.slice(this.cut));
  cost[this.s].ms += performance.now() - t0; cost[this.s].calls += 1;
};
Side.prototype.finish = function () {  // the whole answer once, as one document
  if (this.frame) { cancelAnimationFrame(this.frame); this.frame = 0; }
  this.tell("");
  var t0 = performance.now();
  this.done.innerHTML = render(this.text); this.tail.replaceChildren(); this.cut = this.text.length;
  cost[this.s].ms += performance.now() - t0; cost[this.s].calls += 1;
};
var sides = { a: new Side("a"), b: new Side("b") };
window.arenaMarkdown = { render: render, settled: settled, md: md };  // for the measurements in the tests
document.body.dataset.loading = "0";

function setVotes(on) { votes.forEach(function (b) { b.disabled = !on; }); }
function say(text, error) { status.textContent = text; status.className = error ? "status error" : "status"; }
function post(url, body) {
  return fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body || {})
  });
}
var code = null;  // the code of the last refusal (e.g. "moderated")
async function failed(r) {
  code = null;
  try { var j = await r.json(); code = j.error ? j.error.code : null; return j.error ? j.error.message : r.statusText; }
  catch (e) { return r.statusText; }
}
// Conversations: the turns before the current one are kept above it (#turns, one
// section#turn-N each: the prompt and both answers as rendered); the current turn streams into
// #answer-a / #answer-b. A vote may be cast after any complete turn and ends the battle.
var turns = $("turns"), asked = $("asked"), stop = $("stop"), regen = $("regenerate");
// shown when a new battle is refused for the battles without a vote the visitor already holds
// (429 too_many_open) — battles of a closed page, or cut by a host that stopped, that this page
// cannot show: abandoning them (never counted) frees the visitor's open slots
var abandon = $("abandon");
var turn = 0, lastPrompt = "", reading = null, phase = "new";
// body[data-state]: complete, voted, failed or stopped; absent while a turn streams (and before
// the first), as before conversations
function controls(state) {
  phase = state;
  if (state === "new" || state === "streaming") { delete document.body.dataset.state; }
  else { document.body.dataset.state = state; }
  var streaming = state === "streaming", open = state === "complete";
  stop.hidden = !streaming || mode === "chat"; stop.disabled = !streaming;
  regen.hidden = !open || mode === "chat"; regen.disabled = !open;
  share.hidden = state !== "voted"; share.disabled = false;
  tabs.forEach(function (t) { t.disabled = streaming; });
  pickA.disabled = pickB.disabled = !!battle || streaming;
  copies.forEach(function (b) { b.disabled = streaming || !sides[b.dataset.side].text; });
  send.disabled = !(open || state === "new") || termsPending(); prompt.disabled = !(open || state === "new");
  if (suggest) { suggest.disabled = state !== "new"; }
  send.textContent = battle && open ? "Send follow-up" : "Send";
  again.textContent = mode === "chat" ? "New chat" : "New battle";
  prompt.placeholder = battle && open ? (mode === "chat" ? "Ask a follow-up…" : "Ask a follow-up… (or vote)") : "Type a prompt…";
  again.hidden = !(state === "complete" || state === "voted" || state === "failed" || state === "stopped");
  setVotes(open && !voted);
}
function keepTurn() {  // the finished current turn moves up into #turns
  var sec = document.createElement("section");
  sec.className = "turn"; sec.id = "turn-" + turn; sec.dataset.turn = String(turn);
  var q = document.createElement("p"); q.className = "asked"; q.textContent = lastPrompt;
  var pair = document.createElement("div"); pair.className = "pair";
  ["a", "b"].forEach(function (s) {
    var side = document.createElement("div"); side.className = "side";
    var h = document.createElement("h2"), label = document.createElement("span");
    label.className = "label"; label.textContent = $("side-" + s).querySelector(".label").textContent;
    var name = document.createElement("span"); name.className = "name"; name.textContent = $("name-" + s).textContent;
    var copy = document.createElement("button"); copy.className = "copy"; copy.textContent = "Copy";
    copy.dataset.source = sides[s].text;
    h.append(label, " ", name, copy);
    var ans = document.createElement("div"); ans.className = "answer";
    ans.append.apply(ans, Array.prototype.map.call(sides[s].el.childNodes, function (n) { return n.cloneNode(true); }));
    side.append(h, ans); pair.append(side);
  });
  sec.append(q, pair); turns.append(sec);
}
// the terms of use (when the arena has them): Send waits until they are accepted
var terms = $("terms");
function termsPending() { return document.body.dataset.terms === "pending"; }
function reset() {
  battle = null; voted = false; turn = 0; lastPrompt = ""; showImage(null);
  turns.replaceChildren(); asked.textContent = ""; asked.hidden = true;
  delete document.body.dataset.battle; delete document.body.dataset.chat; document.body.dataset.turn = "0";
  ["a", "b"].forEach(function (s) { sides[s].clear(); $("name-" + s).textContent = ""; });
  shared.hidden = true; shareLink.textContent = ""; shareLink.href = "#";
  controls("new");
}
// the names on the screen before any vote: the picked ones (side by side, chat), none in a battle
function showPicked() {
  $("name-a").textContent = mode === "battle" ? "" : "· " + pickA.value;
  $("name-b").textContent = mode === "named" ? "· " + pickB.value : "";
}
function setMode(m) {
  mode = m; document.body.dataset.mode = m;
  tabs.forEach(function (t) { t.setAttribute("aria-selected", String(t.dataset.mode === m)); });
  Array.prototype.forEach.call(document.querySelectorAll(".intro"), function (p) { p.hidden = p.dataset.for !== m; });
  $("pick-a-label").textContent = m === "chat" ? "Model" : "Model A";
  $("side-a").querySelector(".label").textContent = m === "chat" ? "Answer" : "Model A";
}

// One turn's stream (a first prompt, a follow-up or a regeneration): NDJSON lines
// {"battle_id", "turn", "attempt"}, {"side", "delta"} / {"side", "restart"} / {"side", "state"}
// (queued for the model's free slot: shown in its pane until its answer starts), {"done", "status"}.
async function run(url, body, text) {
  controls("streaming"); send.disabled = true; prompt.disabled = true; abandon.hidden = true;
  say(mode === "chat" ? "The model is answering…" : "Both models are answering…");
  var r, broke = false;
  try { r = await post(url, body); }
  catch (e) { r = null; }
  if (!r) {  // no answer at all (the network, or no host): nothing changed, try again
    say("The arena could not be reached; try again.", true);
    controls(battle ? "complete" : "new");
    if (body.prompt) { prompt.value = body.prompt; }
    return;
  }
  if (!r.ok) {  // refused (a limit, a rate, moderation, the terms): the battle stays as it was, the text stays typed
    var why = await failed(r);
    if (code === "terms_not_accepted") { document.body.dataset.terms = "pending"; terms.hidden = false; }
    controls(battle ? "complete" : "new");
    if (r.status === 422 && code === "moderated") { document.body.dataset.state = "refused"; }
    abandon.hidden = !(r.status === 429 && code === "too_many_open");
    say(why, true);
    if (body.prompt) { prompt.value = body.prompt; }
    return;
  }
  var reader = reading = r.body.getReader(), decoder = new TextDecoder(), buf = "", done = null;
  for (;;) {
    var chunk;
    // the stream can break (the host serving it stopped): the battle then takes no vote
    try { chunk = await reader.read(); } catch (e) { broke = true; break; }
    if (chunk.done) { break; }
    buf += decoder.decode(chunk.value, { stream: true });
    var lines = buf.split("\n"); buf = lines.pop();
    lines.forEach(function (line) {
      if (!line) { return; }
      var m = JSON.parse(line);
      if (m.battle_id || m.chat_id) {
        if (m.turn > turn && turn > 0) { keepTurn(); }
        battle = m.battle_id || m.chat_id; turn = m.turn; lastPrompt = text;
        document.body.dataset[m.chat_id ? "chat" : "battle"] = battle; document.body.dataset.turn = String(turn);
        document.body.dataset.attempt = String(m.attempt || 1);
        if (turn === 1) { showPicked(); }
        sides.a.clear(); sides.b.clear();
        asked.textContent = text; asked.hidden = false;
        if (body.image) { showImage(body.image); attachImage(null); }
      }
      else if (m.state) { sides[m.side].tell(m.state === "queued" ? m.text : ""); }
      else if (m.restart) { sides[m.side].clear(); }
      else if (m.side) { sides[m.side].add(m.delta); }
      else if (m.done) { done = m; }
    });
  }
  reading = null;
  sides.a.finish(); sides.b.finish();
  if (phase === "stopped") { return; }
  if (done && done.status === "complete" && mode === "chat") {
    controls("complete");
    say("The answer is complete: ask a follow-up, or start a new chat.");
  } else if (done && done.status === "complete") {
    controls("complete");
    say("Turn " + turn + " is complete: vote for the better conversation, or ask a follow-up." + (touch ? "" : " (keys 1–4)") +
        (mode === "named" ? " You picked the models: the vote will not count on the leaderboard." : ""));
  } else if (done && done.status === "stopped") {
    controls("stopped"); say("Stopped. This battle is not counted.", true);
  } else if (!done) {  // the host serving it stopped: New battle stops it (never counted)
    controls("failed");
    say("The connection broke during this battle" + (broke ? "" : " (it did not finish)") +
        ". Press New battle: this one is then not counted.", true);
  } else {
    controls("failed");
    say("This battle failed" + (done && done.failure ? ": " + done.failure : "") + ". It is not counted.", true);
  }
}

async function start() {
  var text = prompt.value.trim();
  if (!text) { say("Type a prompt first.", true); return; }
  var base = mode === "chat" ? "/arena/chats" : "/arena/battles";
  if (battle && phase === "complete") {
    prompt.value = "";
    await run(base + "/" + battle + "/turns", { prompt: text }, text);
    return;
  }
  if (battle) { reset(); }
  prompt.value = "";  // shown above the answers as asked; restored if the send is refused
  if (mode === "chat") { await run(base, { prompt: text, model: pickA.value }, text); return; }
  var body = { prompt: text, prompt_id: promptId };
  if (mode === "named") { body.models = [pickA.value, pickB.value]; }
  if (image) { body.image = image; }
  await run(base, body, text);
}

async function regenerate() {
  if (!battle || phase !== "complete") { return; }
  await run("/arena/battles/" + battle + "/regenerate", {}, lastPrompt);
}

async function halt() {
  if (!battle || phase !== "streaming") { return; }
  stop.disabled = true;
  var r = await post("/arena/battles/" + battle + "/stop", {});
  if (!r.ok) { say(await failed(r), true); stop.disabled = false; return; }
  controls("stopped");
  if (reading) { try { reading.cancel(); } catch (e) { /* ended already */ } }
  say("Stopped. This battle is not counted.", true);
}

async function abandonOpen() {
  abandon.disabled = true;
  var r = null;
  try { r = await post("/arena/battles/abandon", {}); } catch (e) { r = null; }
  abandon.disabled = false;
  if (!r) { say("The arena could not be reached; try again.", true); return; }
  if (!r.ok) { say(await failed(r), true); return; }
  var n = (await r.json()).abandoned.length;
  abandon.hidden = true;
  say("Abandoned " + n + " battle" + (n === 1 ? "" : "s") + " without a vote (not counted). Send your prompt again.");
  prompt.focus();
}

async function vote(outcome) {
  if (!battle || voted || votes[0].disabled || mode === "chat") { return; }
  setVotes(false);
  var r = await post("/arena/battles/" + battle + "/vote", { outcome: outcome });
  if (!r.ok) { say(await failed(r), true); setVotes(true); return; }
  var j = await r.json();
  voted = true; controls("voted");
  $("name-a").textContent = "· " + j.model_a; $("name-b").textContent = "· " + j.model_b;
  var told = "Model A was " + j.model_a + ", model B was " + j.model_b + ".";
  if (j.counts === false) {  // kept, but off the board: the voter is told why
    say("Your vote is recorded but will not count: " + j.why + ". " + told);
  } else {
    say("Thank you! " + told);
  }
  again.focus();
}

// Copy: the answer's Markdown source (as the model sent it, shown as a person sees it) to the
// clipboard; body[data-copied] keeps the last copied text's length (for the tests' check)
async function copyAnswer(button) {
  var text = button.dataset.source !== undefined ? button.dataset.source : sides[button.dataset.side].text;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied"; document.body.dataset.copied = String(text.length);
  } catch (e) {
    button.textContent = "Copy failed"; say("The browser refused the clipboard: select the text to copy it.", true);
  }
  setTimeout(function () { button.textContent = "Copy"; }, 1500);
}
document.addEventListener("click", function (e) {
  var b = e.target.closest ? e.target.closest("button.copy") : null;
  if (b && !b.disabled) { copyAnswer(b); }
});
// Share: a link to the battle's read-only view (made by the arena on the first press)
share.addEventListener("click", async function () {
  if (!battle || !voted) { return; }
  share.disabled = true;
  var r = null;
  try { r = await post("/arena/battles/" + battle + "/share", {}); } catch (e) { r = null; }
  if (!r || !r.ok) { say(r ? await failed(r) : "The arena could not be reached; try again.", true); share.disabled = false; return; }
  var url = new URL((await r.json()).url, location.href).href;
  shareLink.href = url; shareLink.textContent = url; shared.hidden = false; share.hidden = true;
});
tabs.forEach(function (t) {
  t.addEventListener("click", async function () {
    if (t.dataset.mode === mode || phase === "streaming") { return; }
    await leave();
    setMode(t.dataset.mode); reset(); promptId = null; say("");
  });
});
[pickA, pickB].forEach(function (p) { p.addEventListener("change", function () { if (!battle) { showPicked(); } }); });
stop.addEventListener("click", halt);
abandon.addEventListener("click", abandonOpen);
regen.addEventListener("click", regenerate);
if (terms) {
  $("accept-terms").addEventListener("click", async function () {
    var r = await post("/arena/terms", { version: terms.dataset.version });
    if (!r.ok) { say(await failed(r), true); return; }
    document.body.dataset.terms = "accepted"; terms.hidden = true;
    controls(phase); say(""); prompt.focus();
  });
}
send.addEventListener("click", start);
// a battle left without a vote is stopped: not counted, and it holds no open slot — a complete
// one, and one whose stream broke (its host died: the arena may still hold it open); a chat
// holds nothing open
async function leave() {
  if (battle && mode !== "chat" && !voted && (phase === "complete" || phase === "failed")) {
    try { await post("/arena/battles/" + battle + "/stop", {}); } catch (e) { /* unreachable: Abandon them frees its slot later */ }
  }
}
again.addEventListener("click", async function () {
  await leave();
  reset(); promptId = null; prompt.value = ""; prompt.focus(); say("");
});
controls("new");
prompt.addEventListener("input", function () { promptId = null; });
if (suggest) {
  suggest.addEventListener("click", async function () {
    var r = await fetch("/arena/prompt", { credentials: "same-origin" });
    if (!r.ok) { say(await failed(r), true); return; }
    var p = await r.json(); prompt.value = p.prompt; promptId = p.id;
  });
}
votes.forEach(function (b) { b.addEventListener("click", function () { vote(b.dataset.outcome); }); });
document.addEventListener("keydown", function (e) {
  if (e.target === prompt) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { start(); }
    return;
  }
  var k = { "1": "model_a", "2": "model_b", "3": "tie", "4": "both_bad" }[e.key];
  if (k) { vote(k); }
});

// ------------------------------------------------------------------ images (vision battles)
// An image attached to a battle's first prompt (offered only when two models that take images
// can answer): read as a data: URL and sent in the battle's body; the server checks its type by
// its first bytes, its size and pixels, and re-encodes it without metadata. Once the battle
// starts it is shown above the conversation (the page's CSP lets data: images only).
var image = null, imageInput = $("image");
function attachImage(url) {
  image = url;
  if (!imageInput) { return; }
  $("image-preview").hidden = !url;
  if (url) { $("image-thumb").src = url; } else { $("image-thumb").removeAttribute("src"); imageInput.value = ""; }
}
function showImage(url) {
  $("battle-image").hidden = !url;
  if (url) { $("battle-image-img").src = url; } else { $("battle-image-img").removeAttribute("src"); }
}
if (imageInput) {
  imageInput.addEventListener("change", function () {
    var file = imageInput.files[0], max = Number(imageInput.dataset.maxBytes);
    if (!file) { attachImage(null); return; }
    if (file.size > max) {
      attachImage(null);
      say("The image is " + file.size + " bytes; the arena takes at most " + max + ".", true);
      return;
    }
    var reader = new FileReader();
    reader.onload = function () { attachImage(reader.result); say(""); };
    reader.onerror = function () { attachImage(null); say("The image could not be read.", true); };
    reader.readAsDataURL(file);
  });
  $("image-clear").addEventListener("click", function () { attachImage(null); });
}
document.body.dataset.ready = "1";
