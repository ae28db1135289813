// What the sweep and search pages' progress boxes share (sweep_progress.js, search_progress.js): poll a run's
// JSON every second (every 3 s after a failed request), and move the bar and the fields of the box, never
// backwards. Each page's script says what to show from one answer.
(function () {
  "use strict";
  window.KVP = window.KVP || {};
  window.KVP.progress = function (box, onAnswer) {
    var meter = box.querySelector(".progress");
    var bar = meter.querySelector(".bar");
    var pctMax = parseInt(meter.getAttribute("aria-valuenow") || "0", 10);
    var view = {
      set: function (name, text) {
        var el = box.querySelector('[data-field="' + name + '"]');
        if (el) { el.textContent = text; }
      },
      // The bar at the largest fraction seen, the status in words, the time left and any error.
      show: function (s) {
        var p = s.progress;
        pctMax = Math.max(pctMax, Math.round(p.fraction * 100));
        bar.style.width = pctMax + "%";
        meter.setAttribute("aria-valuenow", String(pctMax));
        var status = p.status === "stalled" ? "Stalled (a worker stopped; its chunk is being sent again)" : s.status;
        view.set("status", status.charAt(0).toUpperCase() + status.slice(1));
        view.set("eta", p.eta_s === null ? "estimating…" : "about " + Math.round(p.eta_s) + " s");
        view.set("error", p.error || "");
      },
      ended: function (s) { return ["done", "failed", "cancelled"].indexOf(s.status) >= 0; }
    };
    function poll() {
      fetch(box.dataset.statusUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (s) {
          if (onAnswer(s, view) !== false) { window.setTimeout(poll, 1000); }
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    }
    window.setTimeout(poll, 500);
  };
})();
