// Figures that move while the page is open (templates/portal/_measured.html): every element
// with data-refresh is asked for again (htmx's "refresh" trigger) at most every 30 s, and only
// while the tab is visible; the server answers 204 until the measurement moves (portal.refresh).
(function () {
  var EVERY = 30000;
  var last = Date.now();
  function refresh() {
    if (document.visibilityState !== "visible" || Date.now() - last < EVERY) return;
    last = Date.now();
    document.querySelectorAll("[data-refresh]").forEach(function (el) {
      htmx.trigger(el, "refresh");
    });
  }
  setInterval(refresh, 5000);
  document.addEventListener("visibilitychange", refresh);
})();
