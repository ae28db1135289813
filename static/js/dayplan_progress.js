// Live day plan progress: polls GET /api/day-plans/{id}/ (JSON) and moves the bar (static/js/progress_poll.js):
// chunks simulated and hours of traffic covered, never going down; the page reloads once when the plan ends
// (its answer opens).
(function () {
  "use strict";
  var box = document.getElementById("dayplan-progress");
  if (!box || box.dataset.final === "1") { return; }
  var doneMax = parseInt((box.querySelector('[data-field="done"]') || {}).textContent || "0", 10);
  window.KVP.progress(box, function (s, view) {
    var p = s.progress;
    if (view.ended(s)) {
      window.location.reload();
      return false;
    }
    doneMax = Math.max(doneMax, p.chunks_done);
    view.show(s);
    view.set("done", String(doneMax));
    view.set("hours", p.hours_done.toFixed(1));
    view.set("elapsed", String(Math.round(p.elapsed_s || 0)));
    return true;
  });
})();
