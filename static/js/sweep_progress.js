// Live sweep progress: polls GET /api/sweeps/{id}/ (JSON) and moves the bar; reloads once when the sweep ends.
(function () {
  "use strict";
  var box = document.getElementById("sweep-progress");
  if (!box || box.dataset.final === "1") { return; }
  var url = box.dataset.statusUrl;
  var bar = box.querySelector(".progress > .bar");
  var meter = box.querySelector(".progress");
  function set(name, text) {
    var el = box.querySelector('[data-field="' + name + '"]');
    if (el) { el.textContent = text; }
  }
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        var p = s.progress;
        var pct = Math.round(p.fraction * 100);
        bar.style.width = pct + "%";
        meter.setAttribute("aria-valuenow", String(pct));
        var shown = p.status === "stalled" ? "Stalled (a worker stopped; its chunk is being sent again)" : s.status;
        set("status", shown.charAt(0).toUpperCase() + shown.slice(1));
        set("points_done", p.points_done);
        set("points_total", p.points_total);
        set("elapsed", p.elapsed_s.toFixed(1));
        set("eta", p.eta_s === null ? "—" : "about " + Math.round(p.eta_s) + " s");
        set("error", p.error || "");
        if (["done", "failed", "cancelled"].indexOf(s.status) >= 0) {
          window.location.reload();
          return;
        }
        window.setTimeout(poll, 1000);
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  window.setTimeout(poll, 500);
})();
