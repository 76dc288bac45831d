// Draw every element with a data-figure (Plotly JSON built on the server).
document.querySelectorAll("[data-figure]").forEach(function (el) {
  var fig = JSON.parse(el.dataset.figure);
  Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
});
