// Live sweep progress: polls GET /api/sweeps/{id}/ (JSON) and moves the bar (static/js/progress_poll.js). The
// count beside the bar is the bar's own (points finished plus the running batches' share, as
// planner/sweeps/views.py points_shown), so the two never disagree; it never goes down. The page reloads
// when a batch finishes (its results appear under "Results so far") and once when the sweep ends; a cancelled
// sweep whose running batches are still storing the points they finished is watched until they have.
(function () {
  "use strict";
  var box = document.getElementById("sweep-progress");
  if (!box || box.dataset.final === "1") { return; }
  var cliff = box.dataset.mode === "cliff";
  var doneAtLoad = parseInt(box.dataset.pointsDone || "0", 10);
  var shownMax = 0;
  window.KVP.progress(box, function (s, view) {
    var p = s.progress;
    if (s.status === "cancelled" && p.stopping) {  // the running batches are storing what they finished
      return true;
    }
    var shown = cliff ? p.points_done : Math.max(p.points_done, Math.floor(p.fraction * p.points_total + 1e-9));
    shownMax = Math.max(shownMax, shown);
    view.show(s);
    view.set("points_shown", String(shownMax));
    if (!cliff) { view.set("points_total", String(p.points_total)); }
    view.set("elapsed", p.elapsed_s.toFixed(1));
    if (view.ended(s) || p.points_done > doneAtLoad) {
      window.location.reload();
      return false;
    }
    return true;
  });
})();
