// "Copy" beside each launch export (the vllm serve line, the manifests): puts the block's text on the
// clipboard and says so in the block's status (or selects the text to copy by hand).
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      var status = document.getElementById(button.dataset.copy + "-status");
      var text = source.textContent;
      var done = function () { status.textContent = "Copied."; };
      var manual = function () {
        var range = document.createRange();
        range.selectNodeContents(source);
        var sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        status.textContent = "Selected: press Ctrl+C (or Cmd+C) to copy.";
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, manual);
      } else { manual(); }
    });
  });
})();
