// The /arena page: stream a battle's two answers, open the votes when both are complete,
// reveal the names after the vote. Served as a file (the page's CSP allows only this site's
// scripts); posts carry the CSRF token of the page's identity.
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]').content;
  var $ = function (id) { return document.getElementById(id); };
  var prompt = $("prompt"), send = $("send"), again = $("again"), status = $("status");
  var suggest = $("suggest");
  var votes = Array.prototype.slice.call(document.querySelectorAll("button.vote"));
  var battle = null, promptId = null, voted = false;

  function setVotes(on) { votes.forEach(function (b) { b.disabled = !on; }); }
  function say(text, error) { status.textContent = text; status.className = error ? "status error" : "status"; }
  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body)
    });
  }
  async function failed(r) {
    try { var j = await r.json(); return j.error ? j.error.message : r.statusText; }
    catch (e) { return r.statusText; }
  }
  function reset() {
    battle = null; voted = false; setVotes(false);
    ["a", "b"].forEach(function (s) { $("answer-" + s).textContent = ""; $("name-" + s).textContent = ""; });
    again.hidden = true; send.disabled = false; prompt.disabled = false;
    if (suggest) { suggest.disabled = false; }
  }

  async function start() {
    var text = prompt.value.trim();
    if (!text) { say("Type a prompt first.", true); return; }
    reset();
    send.disabled = true; prompt.disabled = true; if (suggest) { suggest.disabled = true; }
    say("Both models are answering…");
    var r = await post("/arena/battles", { prompt: text, prompt_id: promptId });
    if (!r.ok) { say(await failed(r), true); send.disabled = false; prompt.disabled = false; return; }
    var reader = r.body.getReader(), decoder = new TextDecoder(), buf = "", done = null;
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) { break; }
      buf += decoder.decode(chunk.value, { stream: true });
      var lines = buf.split("\n"); buf = lines.pop();
      lines.forEach(function (line) {
        if (!line) { return; }
        var m = JSON.parse(line);
        if (m.battle_id) { battle = m.battle_id; document.body.dataset.battle = battle; }
        else if (m.restart) { $("answer-" + m.side).textContent = ""; }
        else if (m.side) { $("answer-" + m.side).textContent += m.delta; }
        else if (m.done) { done = m; }
      });
    }
    if (done && done.status === "complete") {
      setVotes(true); document.body.dataset.state = "complete";
      say("Both answers are complete: which is better? (keys 1–4)");
    } else {
      document.body.dataset.state = "failed";
      say("This battle failed" + (done && done.failure ? ": " + done.failure : "") + ". It is not counted.", true);
      again.hidden = false;
    }
  }

  async function vote(outcome) {
    if (!battle || voted || votes[0].disabled) { return; }
    setVotes(false);
    var r = await post("/arena/battles/" + battle + "/vote", { outcome: outcome });
    if (!r.ok) { say(await failed(r), true); setVotes(true); return; }
    var j = await r.json();
    voted = true; document.body.dataset.state = "voted";
    $("name-a").textContent = "· " + j.model_a; $("name-b").textContent = "· " + j.model_b;
    say("Thank you! Model A was " + j.model_a + ", model B was " + j.model_b + ".");
    again.hidden = false; again.focus();
  }

  send.addEventListener("click", start);
  again.addEventListener("click", function () { reset(); promptId = null; prompt.value = ""; prompt.focus(); say(""); });
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
})();
