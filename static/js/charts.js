// Draw every element with a data-figure (Plotly JSON built on the server), and those a
// refresh swaps in (htmx).
function chartsDraw(root) {
  root.querySelectorAll("[data-figure]").forEach(function (el) {
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    var fig = JSON.parse(el.dataset.figure);
    Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
  });
}
chartsDraw(document);
document.addEventListener("htmx:load", function (event) { chartsDraw(event.detail.elt); });
