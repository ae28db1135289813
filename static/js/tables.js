// Tables on every page (base.html loads this).
//
// 1. Wide tables scroll inside their box (.table-wrap), never the page. A box that does scroll is made
// reachable by keyboard (tabindex="0": arrow keys scroll it once focused, with the focus ring as the cue),
// named for screen readers (role="region" + the table's name) and preceded by a visible hint saying how many
// columns there are; a box that fits gets none of these (no stop in the tab order that does nothing).
// Run at load, when the window's width changes (a phone turned, a window resized) and when a table's size
// changes; kvpMarkScrollBoxes() runs it again for a table a script added.
// 2. A list table (table.stack) is drawn one block per row on a phone (the stylesheet); Chromium and WebKit
//    then stop exposing it as a table, so its cells get the table roles explicitly.
(function () {
  "use strict";
  function tableName(wrap) {
    var table = wrap.querySelector("table");
    if (!table) { return "Table"; }
    var byId = table.getAttribute("aria-labelledby");
    var named = byId && document.getElementById(byId);
    var text = table.getAttribute("aria-label") || (named && named.textContent) ||
      (table.caption && table.caption.textContent) || "Table";
    return text.trim();
  }
  function columns(wrap) {
    var row = wrap.querySelector("thead tr") || wrap.querySelector("tr");
    if (!row) { return 0; }
    var n = 0;
    Array.prototype.forEach.call(row.children, function (cell) { n += cell.colSpan || 1; });
    return n;
  }
  function mark(wrap) {
    var hint = wrap.previousElementSibling;
    var hasHint = hint && hint.classList.contains("scroll-hint");
    var scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
    wrap.classList.toggle("scrolls", scrolls);
    if (!scrolls) {
      if (wrap.dataset.kvpScroll) {
        wrap.removeAttribute("tabindex"); wrap.removeAttribute("role"); wrap.removeAttribute("aria-label");
        delete wrap.dataset.kvpScroll;
      }
      if (hasHint) { hint.remove(); }
      return;
    }
    wrap.dataset.kvpScroll = "1";
    wrap.tabIndex = 0;
    wrap.setAttribute("role", "region");
    wrap.setAttribute("aria-label", tableName(wrap) + " (scrolls sideways)");
    if (!hasHint) {
      hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.setAttribute("aria-hidden", "true");  // the region's name says it to screen readers
      wrap.parentNode.insertBefore(hint, wrap);
    }
    var n = columns(wrap);
    hint.textContent = (n ? "All " + n + " columns: " : "") + "scroll the table sideways \u2192";
  }
  function markAll() {
    document.querySelectorAll(".table-wrap").forEach(mark);
  }
  var lastWidth = 0, timer = null;
  function onResize() {
    if (window.innerWidth === lastWidth) { return; }
    lastWidth = window.innerWidth;
    clearTimeout(timer);
    timer = setTimeout(markAll, 100);
  }
  window.kvpMarkScrollBoxes = markAll;
  function keepTableRoles() {
    document.querySelectorAll("table.stack").forEach(function (table) {
      table.setAttribute("role", "table");
      table.querySelectorAll("thead, tbody").forEach(function (g) { g.setAttribute("role", "rowgroup"); });
      table.querySelectorAll("tr").forEach(function (r) { r.setAttribute("role", "row"); });
      table.querySelectorAll("thead th").forEach(function (c) { c.setAttribute("role", "columnheader"); });
      table.querySelectorAll("tbody th").forEach(function (c) { c.setAttribute("role", "rowheader"); });
      table.querySelectorAll("td").forEach(function (c) { c.setAttribute("role", "cell"); });
    });
  }
  function start() {
    keepTableRoles();
    lastWidth = window.innerWidth;
    markAll();
    window.addEventListener("resize", onResize);
    if (window.ResizeObserver) {  // rows added later (a running sweep's results so far) widen a table
      var observer = new ResizeObserver(function (entries) {
        entries.forEach(function (e) { var w = e.target.closest(".table-wrap"); if (w) { mark(w); } });
      });
      document.querySelectorAll(".table-wrap > table").forEach(function (t) { observer.observe(t); });
    }
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
