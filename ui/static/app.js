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
})();
