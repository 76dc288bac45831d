// Filters that apply as soon as they change: a <select data-autosubmit> submits its form
// (kept out of the markup: the Content-Security-Policy allows no inline handler).
document.addEventListener("change", function (event) {
  var el = event.target;
  if (el.matches && el.matches("[data-autosubmit]") && el.form) el.form.submit();
});
