// Filters that apply as soon as they change: a <select data-autosubmit> submits its form
// (kept out of the markup: the Content-Security-Policy allows no inline handler).
document.addEventListener("change", function (event) {
  var el = event.target;
  if (el.matches && el.matches("[data-autosubmit]") && el.form) el.form.submit();
});

// The new alert rule's form (templates/portal/alerts.html): only the chosen kind's fieldset
// is shown and sent, and the tenant only for kinds whose rules may name one.
function ruleKindShow(select) {
  var form = select.form;
  var chosen = select.value;
  form.querySelectorAll("fieldset[data-kind]").forEach(function (set) {
    var on = set.getAttribute("data-kind") === chosen;
    set.hidden = !on;
    set.disabled = !on;
  });
  var tenant = form.querySelector("[data-tenant-field]");
  if (tenant) {
    var option = select.options[select.selectedIndex];
    var never = option && option.getAttribute("data-tenant") === "never";
    tenant.hidden = never;
    tenant.querySelector("select").disabled = never;
  }
}
document.addEventListener("change", function (event) {
  if (event.target.matches && event.target.matches("[data-kind-select]")) ruleKindShow(event.target);
});
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-kind-select]").forEach(ruleKindShow);
});
