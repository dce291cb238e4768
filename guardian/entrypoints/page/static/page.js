// Guardian's status page, live: the server sends the parts of the page that changed (Server-
// Sent Events); this replaces only those cells. The page is complete without it.
"use strict";
(function () {
  var live = document.getElementById("live");
  var updated = document.getElementById("updated");
  if (!live || !window.EventSource || !window.fetch) { return; }
  var streamUrl = live.getAttribute("data-stream");
  var pollTimer = null;

  function say(text) { live.textContent = text; }

  function parse(html, wrap) {
    var t = document.createElement("template");
    t.innerHTML = wrap ? "<table><tbody>" + html + "</tbody></table>" : html;
    return t.content;
  }

  function findRow(name) {
    var rows = document.querySelectorAll("#part-rows tr[data-container]");
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-container") === name) { return rows[i]; }
    }
    return null;
  }

  function updateRow(name, html) {
    var row = findRow(name);
    var fresh = parse(html, true).querySelector("tr");
    if (!row || !fresh) { return; }
    ["data-state", "data-incident"].forEach(function (a) {
      if (row.getAttribute(a) !== fresh.getAttribute(a)) { row.setAttribute(a, fresh.getAttribute(a)); }
    });
    var cells = fresh.children;
    for (var i = 0; i < cells.length; i++) {
      var col = cells[i].getAttribute("data-col");
      var cell = row.querySelector('[data-col="' + col + '"]');
      if (cell && cell.innerHTML !== cells[i].innerHTML) { cell.innerHTML = cells[i].innerHTML; }
    }
  }

  function apply(doc) {
    var parts = doc.parts || {};
    Object.keys(parts).forEach(function (key) {
      if (key.indexOf("row:") === 0) { updateRow(key.slice(4), parts[key]); return; }
      var el = document.getElementById(key);
      if (!el) { return; }
      if (key === "part-rows") {
        el.replaceChildren.apply(el, Array.prototype.slice.call(parse(parts[key], true).querySelector("tbody").children));
      } else if (el.innerHTML !== parts[key]) {
        el.innerHTML = parts[key];
      }
    });
    if (doc.updated && updated) {
      updated.textContent = doc.updated.replace("T", " ").replace("+00:00", " UTC");
      updated.setAttribute("datetime", doc.updated);
    }
  }

  function poll() {
    fetch("/parts", { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) { throw new Error(r.status); }
      return r.json();
    }).then(function (doc) {
      apply(doc);
      say("live updates: polling every 10 s (no stream free)");
    }).catch(function () { say("live updates lost: reload to see the present"); });
  }

  function connect() {
    var source = new EventSource(streamUrl, { withCredentials: true });
    source.addEventListener("open", function () {
      if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
      say("live");
    });
    source.addEventListener("parts", function (e) {
      apply(JSON.parse(e.data));
      say("live");
    });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (no free stream, signed out): poll, and try the stream again later.
        say("live updates: polling");
        poll();
        if (!pollTimer) { pollTimer = setInterval(poll, 10000); }
        setTimeout(connect, 30000);
      } else {
        say("reconnecting…");
      }
    });
  }
  say("connecting…");
  connect();
})();
