// A form whose answer takes seconds (data-busy="what it is doing") says so once submitted: its button is
// disabled (no second submit), the form is aria-busy, and the text goes into the form's role="status" box,
// read out by screen readers. The page that comes back replaces all of it; without JavaScript nothing changes.
(function () {
  "use strict";
  document.querySelectorAll("form[data-busy]").forEach(function (form) {
    form.addEventListener("submit", function () {
      var status = form.querySelector("[data-busy-status]");
      form.setAttribute("aria-busy", "true");
      form.querySelectorAll("button[type=submit]").forEach(function (b) {
        // disabled after this event: disabling now would drop the button from what the browser submits
        setTimeout(function () { b.disabled = true; }, 0);
      });
      if (status) { status.textContent = form.dataset.busy; status.hidden = false; }
    });
  });
})();
