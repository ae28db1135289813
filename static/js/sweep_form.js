// The sweep form shows the section of the chosen mode only (a grid's axes, or the cliff search); without
// JavaScript both stay visible. After a failed submit the error summary takes the focus.
(function () {
  "use strict";
  var mode = document.getElementById("id_mode");
  function show() {
    document.querySelectorAll("[data-mode-section]").forEach(function (section) {
      section.hidden = section.dataset.modeSection !== mode.value;
    });
  }
  if (mode) { mode.addEventListener("change", show); show(); }
  var summary = document.getElementById("error-summary");
  if (summary) { summary.focus(); }
})();
