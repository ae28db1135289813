// Live progress of a run a page handed to the workers (a replicas search, a calibration): polls
// GET /api/runs/{id}/ (JSON) and moves the bar (static/js/progress_poll.js); the page reloads once when the run
// ends (its answer, or its error, opens).
(function () {
  "use strict";
  var box = document.getElementById("run-progress");
  if (!box || box.dataset.final === "1") { return; }
  window.KVP.progress(box, function (s, view) {
    if (view.ended(s)) {
      window.location.reload();
      return false;
    }
    view.show(s);
    return true;
  });
})();
