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
      // On a phone the toolbar would sit on the chart's title (there is no hover to hide it): none there.
      var narrow = window.matchMedia("(max-width: 700px)").matches;
      if (narrow) {
        layout.margin = Object.assign({}, layout.margin || {}, { l: 56, r: 16 });
        layout.font = Object.assign({}, layout.font || {}, { size: 11 });
      }
      Plotly.newPlot(target, fig.data || [], layout,
        { responsive: true, displaylogo: false, displayModeBar: narrow ? false : "hover" });
    });
  }
  window.kvpDrawFigures = draw;
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
