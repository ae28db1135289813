// "Copy link" on a report: puts the permalink on the clipboard and says so (or shows it to copy by hand).
(function () {
  "use strict";
  var button = document.getElementById("copy-link");
  var status = document.getElementById("copy-status");
  if (!button) { return; }
  button.addEventListener("click", function () {
    var url = button.dataset.url;
    var done = function () { status.textContent = "Link copied."; };
    var manual = function () { status.textContent = url; };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(url).then(done, manual);
    } else { manual(); }
  });
})();
