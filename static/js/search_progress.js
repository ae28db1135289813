// Live search progress: polls GET /api/searches/{id}/ (JSON) and moves the bar (static/js/progress_poll.js).
// The count beside the bar is the bar's own (progress.candidates_shown, planner/search/selectors.py), so the
// two never disagree, and neither goes down; the bar stays below 100 % until the search is done, and while
// its xPyD stage runs (every shape settled) the text says it compares prefill/decode splits. The page
// reloads once when the search ends (a finished search opens its report).
(function () {
  "use strict";
  var box = document.getElementById("search-progress");
  if (!box || box.dataset.final === "1") { return; }
  var shownMax = parseInt((box.querySelector('[data-field="shown"]') || {}).textContent || "0", 10);
  window.KVP.progress(box, function (s, view) {
    var p = s.progress;
    if (view.ended(s)) {
      window.location.reload();
      return false;
    }
    shownMax = Math.max(shownMax, p.candidates_shown);
    view.show(s);
    view.set("shown", String(shownMax));
    view.set("phase", {xpyd: "· comparing prefill/decode splits", seeds: "· checking the answer on more traffic seeds"}[p.phase] || "");
    view.set("elapsed", String(Math.round(p.elapsed_s || 0)));
    return true;
  });
})();
