// The flywheel page's scenario simulator: factor sliders, lever checkboxes and the
// multiplier estimate recompute the projection through POST /api/v1/flywheel/scenarios,
// without reloading the page. Only the sliders a user moved are sent as targets.
(function () {
  "use strict";
  var form = document.getElementById("scenario-form");
  if (!form) return;
  var config = JSON.parse(form.dataset.config);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
  var touched = {};
  var timer = null;
  var sequence = 0;

  function $(id) { return document.getElementById(id); }

  function pct(value) {
    return value === null || value === undefined ? "—" : (value * 100).toFixed(1) + "%";
  }

  function whole(value) {
    if (value === null || value === undefined) return "—";
    return Math.round(parseFloat(value)).toLocaleString("en-US");
  }

  function signed(number, text) {
    if (Math.abs(number) < 0.05) return "no change";
    return (number > 0 ? "+" : "−") + text;
  }

  function pointsDelta(after, before) {
    if (after === null || before === null) return "";
    var points = (after - before) * 100;
    return signed(points, Math.abs(points).toFixed(1) + " pts");
  }

  function moneyDelta(after, before) {
    if (after === null || before === null) return "";
    var delta = parseFloat(after) - parseFloat(before);
    return signed(delta, Math.abs(Math.round(delta)).toLocaleString("en-US"));
  }

  function setText(id, text) { var el = $(id); if (el) el.textContent = text; }

  function sliders() { return form.querySelectorAll("input[type=range][data-factor]"); }

  function showSlider(input) {
    setText("value-" + input.dataset.factor, parseFloat(input.value).toFixed(1) + "%");
  }

  function body() {
    var targets = {};
    sliders().forEach(function (input) {
      if (touched[input.dataset.factor]) {
        targets[input.dataset.factor] = (parseFloat(input.value) / 100).toFixed(4);
      }
    });
    var levers = [];
    form.querySelectorAll("input[name=lever]:checked").forEach(function (box) {
      levers.push(box.value);
    });
    return {
      from: config.from,
      to: config.to,
      baseline: config.baseline,
      targets: targets,
      levers: levers,
      estimate: $("scenario-estimate").value
    };
  }

  function renderGoal(data) {
    var box = $("scenario-goal");
    box.textContent = "";
    if (!data.goal) return;
    var title = document.createElement("p");
    var verdict = document.createElement("span");
    verdict.className = "badge " + (data.goal.is_met ? "good" : "bad");
    verdict.textContent = data.goal.is_met ? "goal met" : "goal not met";
    title.appendChild(document.createTextNode("This scenario (typical multipliers): "));
    title.appendChild(verdict);
    box.appendChild(title);
    var list = document.createElement("ul");
    data.goal.criteria.forEach(function (c) {
      var item = document.createElement("li");
      var isMoney = c.key === "ebitda_per_month";
      item.textContent = c.label + ": " + (isMoney ? whole(c.actual) : pct(c.actual)) +
        " against ≥ " + (isMoney ? whole(c.required) : pct(c.required)) +
        (c.is_met ? " — met" : " — short");
      list.appendChild(item);
    });
    box.appendChild(list);
    if (data.proposal) {
      var proposal = document.createElement("p");
      proposal.id = "scenario-proposal";
      if (data.proposal.is_found) {
        proposal.textContent = "Cheapest lever set that meets it: " +
          (data.proposal.levers.length ? data.proposal.levers.join(", ") : "none needed") +
          " — cost " + whole(data.proposal.cost) + " " + config.currency +
          " (one-time + 12 × monthly); EBITDA " + whole(data.proposal.projected.ebitda_per_month) +
          " per month.";
      } else {
        proposal.textContent = "No lever set meets it: " + data.proposal.message + ".";
      }
      box.appendChild(proposal);
    }
  }

  function render(data) {
    var m = data.measured, p = data.projected;
    setText("projected-tfi", pct(p.tfi));
    setText("delta-tfi", "measured " + pct(m.tfi) + " · " + pointsDelta(p.tfi, m.tfi));
    setText("projected-tef", pct(p.tef));
    setText("delta-tef", "measured " + pct(m.tef) + " · " + pointsDelta(p.tef, m.tef));
    setText("projected-ebitda", whole(p.ebitda_per_month));
    setText("delta-ebitda", "measured " + whole(m.ebitda_per_month) + " · " +
      moneyDelta(p.ebitda_per_month, m.ebitda_per_month));
    setText("projected-margin", pct(p.gross_margin));
    setText("delta-margin", "measured " + pct(m.gross_margin) + " · " +
      pointsDelta(p.gross_margin, m.gross_margin));
    setText("projected-revenue", whole(p.revenue_per_month));
    setText("delta-revenue", "measured " + whole(m.revenue_per_month) + " · " +
      moneyDelta(p.revenue_per_month, m.revenue_per_month));
    setText("projected-cost", whole(data.lever_costs.total));
    setText("delta-cost", "one-time " + whole(data.lever_costs.one_time) + " · monthly " +
      whole(data.lever_costs.monthly));
    var chart = $("scenario-chart");
    if (chart && window.Plotly && chart.data) {
      var projected = config.factors.map(function (f) {
        var value = data.factors[f.key].projected;
        return value === null ? null : value * 100;
      });
      window.Plotly.restyle(chart, {y: [projected]}, [1]);
    }
    if (data.levers.length) {
      var low = data.range.low, high = data.range.high;
      setText("scenario-range", "Range of the levers' multipliers: TFI " + pct(low.tfi) + " – " +
        pct(high.tfi) + ", EBITDA per month " + whole(low.ebitda_per_month) + " – " +
        whole(high.ebitda_per_month) + ".");
    } else {
      setText("scenario-range", "No lever ticked: the projection moves only the factors you set.");
    }
    renderGoal(data);
  }

  function run() {
    var mine = ++sequence;
    setText("scenario-status", "Projecting…");
    fetch("/api/v1/flywheel/scenarios", {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "X-CSRFToken": headers["X-CSRFToken"] || ""
      },
      body: JSON.stringify(body())
    }).then(function (response) {
      return response.json().then(function (json) { return {ok: response.ok, json: json}; });
    }).then(function (result) {
      if (mine !== sequence) return;  // a later request supersedes this one
      if (!result.ok) {
        var errors = (result.json.errors || []).map(function (e) {
          return (e.field ? e.field + ": " : "") + e.message;
        });
        setText("scenario-status", "Could not project: " + errors.join("; "));
        return;
      }
      render(result.json);
      setText("scenario-status", "Projected at " + new Date().toISOString().slice(11, 19) + " UTC.");
    }).catch(function (error) {
      if (mine === sequence) setText("scenario-status", "Could not project: " + error);
    });
  }

  function schedule() {
    window.clearTimeout(timer);
    timer = window.setTimeout(run, 200);
  }

  sliders().forEach(function (input) {
    input.addEventListener("input", function () {
      touched[input.dataset.factor] = true;
      showSlider(input);
      schedule();
    });
  });
  form.querySelectorAll("input[name=lever], #scenario-estimate").forEach(function (el) {
    el.addEventListener("change", schedule);
  });
  $("scenario-reset").addEventListener("click", function () {
    touched = {};
    sliders().forEach(function (input) {
      input.value = input.dataset.measured;
      showSlider(input);
    });
    form.querySelectorAll("input[name=lever]:checked").forEach(function (box) {
      box.checked = false;
    });
    $("scenario-estimate").value = "typical";
    schedule();
  });
})();
