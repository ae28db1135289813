// Draws every Plotly figure on the page. Convention ({% plotly_figure %} in planner/templatetags/kvp.py):
//   <div class="figure" id="fig-x" data-figure="fig-x-data" role="figure" aria-label="...">fallback</div>
//   + json_script "fig-x-data"
(function () {
  "use strict";
  var measure = document.createElement("canvas").getContext("2d");

  // A title wider than its chart is cut off on a phone: break it between words into lines that fit,
  // and give the chart the room the extra lines take (its top margin and its height, box included).
  function fitTitle(target, layout) {
    var title = layout.title;
    if (!title || typeof title.text !== "string" || !title.text) { return; }
    var size = (title.font && title.font.size) || 15;
    var family = (title.font && title.font.family) || (layout.font && layout.font.family) || "sans-serif";
    measure.font = size + "px " + family;
    var room = target.clientWidth - 24;
    var words = title.text.split(/\s+/), lines = [], line = "";
    words.forEach(function (w) {
      var next = line ? line + " " + w : w;
      if (line && measure.measureText(next).width > room) { lines.push(line); line = w; } else { line = next; }
    });
    if (line) { lines.push(line); }
    if (lines.length < 2) { return; }
    var lineHeight = size * 1.3, extra = Math.ceil((lines.length - 1) * lineHeight);
    var height = (layout.height || target.clientHeight || 380) + extra;
    // Plotly centres a title's lines on its anchor whatever the anchor says: move it down by half the
    // extra lines so that the first one starts where a one-line title would.
    var y = typeof title.y === "number" ? title.y : 0.985;
    var fromTop = (1 - y) * (height - extra) + extra / 2;
    layout.title = Object.assign({}, title, { text: lines.join("<br>"), y: 1 - fromTop / height });
    layout.margin = Object.assign({}, layout.margin || {});
    layout.margin.t = (layout.margin.t || 60) + extra;
    layout.height = height;
    target.style.height = height + 2 + "px";  // the box's 1 px borders
  }

  // Text drawn inside a bar is black or white, whichever contrasts more with the bar (Plotly's own choice,
  // its dark grey, gives 3.1:1 on a mid green; WCAG asks 4.5:1).
  function luminance(hex) {
    var m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex || "");
    if (!m) { return null; }
    var c = [m[1], m[2], m[3]].map(function (h) {
      var v = parseInt(h, 16) / 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }
  function contrastInsideBars(data) {
    (data || []).forEach(function (trace) {
      if (trace.type !== "bar" || !trace.text || (trace.insidetextfont && trace.insidetextfont.color)) { return; }
      var colour = trace.marker && trace.marker.color;
      var pick = function (c) {
        var lum = luminance(c);
        if (lum === null) { return undefined; }
        return 1.05 / (lum + 0.05) >= (lum + 0.05) / 0.05 ? "#ffffff" : "#000000";
      };
      var text = Array.isArray(colour) ? colour.map(pick) : pick(colour);
      if (text === undefined) { return; }
      trace.insidetextfont = Object.assign({}, trace.insidetextfont || {}, { color: text });
    });
  }

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
        fitTitle(target, layout);
      }
      contrastInsideBars(fig.data);
      Plotly.newPlot(target, fig.data || [], layout,
        { responsive: true, displaylogo: false, displayModeBar: narrow ? false : "hover" }).then(function () {
        // The box is named by its title (role="figure"); the drawing's tick labels would read as noise,
        // so the SVG layers are hidden from screen readers (the numbers are in the page's tables).
        target.querySelectorAll(".main-svg").forEach(function (svg) { svg.setAttribute("aria-hidden", "true"); });
      });
    });
  }
  window.kvpDrawFigures = draw;
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
