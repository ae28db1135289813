// Live sweep progress: polls GET /api/sweeps/{id}/ (JSON) and moves the bar. The count beside the bar is the
// bar's own (points finished plus the running batches' share, as planner/sweeps/views.py points_shown), so
// the two never disagree; it never goes down. The page reloads when a batch finishes (its results appear
// under "Results so far") and once when the sweep ends.
(function () {
  "use strict";
  var box = document.getElementById("sweep-progress");
  if (!box || box.dataset.final === "1") { return; }
  var url = box.dataset.statusUrl;
  var cliff = box.dataset.mode === "cliff";
  var doneAtLoad = parseInt(box.dataset.pointsDone || "0", 10);
  var bar = box.querySelector(".progress > .bar");
  var meter = box.querySelector(".progress");
  var shownMax = 0;
  var pctMax = parseInt(meter.getAttribute("aria-valuenow") || "0", 10);
  function set(name, text) {
    var el = box.querySelector('[data-field="' + name + '"]');
    if (el) { el.textContent = text; }
  }
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        var p = s.progress;
        var ended = ["done", "failed", "cancelled"].indexOf(s.status) >= 0;
        var shown = cliff ? p.points_done : Math.max(p.points_done, Math.floor(p.fraction * p.points_total + 1e-9));
        shownMax = Math.max(shownMax, shown);
        pctMax = Math.max(pctMax, Math.round(p.fraction * 100));
        bar.style.width = pctMax + "%";
        meter.setAttribute("aria-valuenow", String(pctMax));
        var status = p.status === "stalled" ? "Stalled (a worker stopped; its chunk is being sent again)" : s.status;
        set("status", status.charAt(0).toUpperCase() + status.slice(1));
        set("points_shown", String(shownMax));
        if (!cliff) { set("points_total", String(p.points_total)); }
        set("elapsed", p.elapsed_s.toFixed(1));
        set("eta", p.eta_s === null ? "estimating…" : "about " + Math.round(p.eta_s) + " s");
        set("error", p.error || "");
        if (ended || p.points_done > doneAtLoad) {
          window.location.reload();
          return;
        }
        window.setTimeout(poll, 1000);
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  window.setTimeout(poll, 500);
})();
