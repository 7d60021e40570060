// Spool dashboard: draws the throughput chart with uPlot from the JSON the
// server sends, and refreshes it. Everything else is server-rendered HTML
// that htmx refreshes in place.
(function () {
  "use strict";
  var colors = { completed: "#2e7d32", discarded: "#c62828", cancelled: "#757575" };

  function draw(el) {
    var src = el.getAttribute("data-chart");
    var plot = null;
    function load() {
      fetch(src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status + " " + r.statusText); } return r.json(); })
        .then(function (body) {
          if (plot) { plot.setData(body.data); return; }
          var series = [{}].concat(body.series.map(function (name) {
            return { label: name, stroke: colors[name] || "#1565c0", width: 2, points: { show: false } };
          }));
          var width = Math.max(300, el.clientWidth || 800);
          plot = new uPlot({ width: width, height: 220, series: series, scales: { x: { time: true } },
            axes: [{}, { label: "jobs / min" }] }, body.data, el);
          el.setAttribute("data-ready", "true");
        })
        .catch(function (err) { el.setAttribute("data-error", String(err)); el.textContent = "chart unavailable: " + err; });
    }
    load();
    setInterval(load, 10000);
  }

  document.querySelectorAll("[data-chart]").forEach(draw);

  // A live refresh that fails (the job was deleted, the server went away,
  // the filter is refused) stops refreshing: the page stays as last shown,
  // says why, and asking again every few seconds would fail again. htmx
  // polls an element while it is in the document, so the element is
  // replaced by a copy htmx never processed.
  document.body.addEventListener("htmx:responseError", function (ev) { stopLive(ev, ev.detail.xhr.status + " " + ev.detail.xhr.statusText); });
  document.body.addEventListener("htmx:sendError", function (ev) { stopLive(ev, "the server did not answer"); });
  function stopLive(ev, why) {
    var live = document.getElementById("live");
    if (!live || ev.detail.elt !== live) { return; }
    var still = live.cloneNode(true);
    still.removeAttribute("hx-get");
    still.removeAttribute("hx-trigger");
    still.setAttribute("data-stopped", why);
    var note = document.createElement("p");
    note.className = "error";
    note.id = "live-stopped";
    note.setAttribute("role", "alert");
    note.textContent = "Live refresh stopped: " + why + ". Reload the page to try again.";
    live.replaceWith(still);
    still.parentNode.insertBefore(note, still);
  }
})();
