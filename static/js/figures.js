// Draws every Plotly figure on the page. Convention ({% plotly_figure %} in planner/templatetags/kvp.py):
//   <div class="figure" id="fig-x" data-figure="fig-x-data">fallback text</div>  +  json_script "fig-x-data"
(function () {
  "use strict";
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("[data-figure]").forEach(function (target) {
      var source = document.getElementById(target.dataset.figure);
      if (!source) { return; }
      var fig = JSON.parse(source.textContent);
      if (typeof fig === "string") { fig = JSON.parse(fig); }
      var layout = Object.assign({ autosize: true }, fig.layout || {});
      target.textContent = "";  // the no-JavaScript text
      Plotly.newPlot(target, fig.data || [], layout, { responsive: true, displaylogo: false });
    });
  }
  window.kvpDrawFigures = draw;
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
