// Live search progress: polls GET /api/searches/{id}/ (JSON) and moves the bar. The count beside the bar is
// the bar's own (progress.candidates_shown, planner/search/selectors.py), so the two never disagree, and
// neither goes down; the bar stays below 100 % until the search is done, and while its xPyD stage runs
// (every shape settled) the text says it compares prefill/decode splits. The page reloads once when the
// search ends (a finished search opens its report).
(function () {
  "use strict";
  var box = document.getElementById("search-progress");
  if (!box || box.dataset.final === "1") { return; }
  var url = box.dataset.statusUrl;
  var bar = box.querySelector(".progress > .bar");
  var meter = box.querySelector(".progress");
  var shownMax = parseInt((box.querySelector('[data-field="shown"]') || {}).textContent || "0", 10);
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
        if (["done", "failed", "cancelled"].indexOf(s.status) >= 0) {
          window.location.reload();
          return;
        }
        shownMax = Math.max(shownMax, p.candidates_shown);
        pctMax = Math.max(pctMax, Math.round(p.fraction * 100));
        bar.style.width = pctMax + "%";
        meter.setAttribute("aria-valuenow", String(pctMax));
        var status = p.status === "stalled" ? "Stalled (a worker stopped; its chunk is being sent again)" : s.status;
        set("status", status.charAt(0).toUpperCase() + status.slice(1));
        set("shown", String(shownMax));
        set("phase", p.phase === "xpyd" ? "· comparing prefill/decode splits" : "");
        set("elapsed", String(Math.round(p.elapsed_s || 0)));
        set("eta", p.eta_s === null ? "estimating…" : "about " + Math.round(p.eta_s) + " s");
        set("error", p.error || "");
        window.setTimeout(poll, 1000);
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  window.setTimeout(poll, 500);
})();
