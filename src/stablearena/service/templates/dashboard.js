(function () {
  "use strict";
  // The dashboard refreshes itself: every few seconds it asks the server for the state of the
  // arena (a small JSON) and, when a newer fit has been drawn, fetches the new content and puts
  // it in place. Everything comes from this server; nothing else is loaded.
  var body = document.body;
  var version = body.getAttribute("data-version");
  var poll = body.getAttribute("data-poll");
  var fragment = body.getAttribute("data-fragment");
  var login = body.getAttribute("data-login");
  var every = 1000 * parseFloat(body.getAttribute("data-every") || "3");

  function byId(id) { return document.getElementById(id); }

  async function refresh() {
    var r = await fetch(poll + "?v=" + encodeURIComponent(version),
                        {cache: "no-store", credentials: "same-origin"});
    if (r.status === 401 && login) { window.location.assign(login); return; }
    if (!r.ok) { throw new Error("HTTP " + r.status); }
    var s = await r.json();
    if (s.status && byId("live-status")) { byId("live-status").textContent = s.status; }
    if (s.health_html && byId("health")) { byId("health").innerHTML = s.health_html; }
    if (s.version !== version) {
      var f = await fetch(fragment, {cache: "no-store", credentials: "same-origin"});
      if (f.ok) {
        byId("live").innerHTML = await f.text();
        version = f.headers.get("X-Dashboard-Version") || s.version;
        body.setAttribute("data-version", version);
      }
    }
    body.removeAttribute("data-offline");
  }

  function tick() {
    refresh().catch(function () {
      body.setAttribute("data-offline", "1");
      if (byId("live-status")) {
        byId("live-status").textContent = "The arena does not answer; retrying…";
      }
    }).finally(function () { window.setTimeout(tick, every); });
  }
  window.setTimeout(tick, every);
})();
