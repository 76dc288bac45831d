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
    if (value === null || value === undefined) return "—";
    var text = (value * 100).toFixed(1);
    return (text === "-0.0" ? "0.0" : text) + "%";
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
    var shape = {
      from: config.from,
      to: config.to,
      baseline: config.baseline,
      targets: targets,
      levers: levers,
      estimate: $("scenario-estimate").value,
      demand: $("scenario-demand").value
    };
    if (shape.demand === "growth") shape.growth_pct_per_month = $("scenario-growth").value;
    return shape;
  }

  function gpus(value) {
    return value === null || value === undefined ? "—" :
      Math.round(value).toLocaleString("en-US");
  }

  function cell(row, text) {
    var td = document.createElement("td");
    td.className = "num";
    td.textContent = text;
    row.appendChild(td);
  }

  function renderPools(pools) {
    var body = document.querySelector("#scenario-pools tbody");
    if (!body) return;
    body.textContent = "";
    pools.forEach(function (p) {
      var row = document.createElement("tr");
      row.dataset.pool = p.pool;
      var name = document.createElement("td");
      name.textContent = p.pool;
      name.className = "nowrap";
      row.appendChild(name);
      var arrow = function (before, after) {
        return Math.round(before) === Math.round(after) ? gpus(after) : gpus(before) + " → " + gpus(after);
      };
      cell(row, arrow(p.installed_gpus, p.projected_installed_gpus));
      cell(row, arrow(p.busy_gpus, p.projected_busy_gpus));
      cell(row, arrow(p.headroom_gpus, p.projected_headroom_gpus));
      cell(row, gpus(p.released_gpus));
      cell(row, gpus(p.withdrawn_gpus));
      body.appendChild(row);
    });
  }

  function renderSeries(data) {
    var block = $("growth-block");
    if (!block) return;
    block.hidden = !data.series;
    if (!data.series || !window.Plotly) return;
    var months = data.series.months;
    var x = months.map(function (m) { return m.month; });
    var most = Math.max.apply(null, months.map(function (m) {
      return Math.max(m.demand_tokens, m.capacity_tokens, m.served_tokens);
    }));
    var unit = most >= 1e12 ? 1e12 : 1e9;  // never "10k billion"
    var line = function (key, name, colour, dash) {
      return {x: x, y: months.map(function (m) { return m[key] / unit; }), name: name,
        type: "scatter", mode: "lines+markers", line: {color: colour, dash: dash || "solid"}};
    };
    window.Plotly.react("growth-chart", [
      line("demand_tokens", "demand", "#868e96", "dot"),
      line("capacity_tokens", "capacity (all available GPUs busy)", "#d9480f", "dash"),
      line("served_tokens", "served", "#1f6feb")
    ], {
      margin: {l: 60, r: 20, t: 10, b: 70},
      xaxis: {title: {text: "Month after the measured period"}, dtick: 1},
      yaxis: {title: {text: unit === 1e12 ? "Trillion tokens" : "Billion tokens"}, rangemode: "tozero"},
      legend: {orientation: "h", yref: "container", y: 0, yanchor: "bottom"}, font: {size: 12}
    }, {displayModeBar: false, responsive: true});
    var first = data.series.first_month_over_capacity;
    var last = months[months.length - 1];
    setText("growth-note", (first ?
      "Demand first exceeds today's capacity (without the scenario's levers) in month " + first +
      " (" + data.series.pools_over_capacity.join(", ") + "). " :
      "Demand stays within today's capacity for all 12 months. ") +
      "Tokens and money " + config.perMonth + ". Month 12: revenue " + whole(last.revenue_per_month) + ", EBITDA " +
      whole(last.ebitda_per_month) + " " + config.currency + "; the tiles show month 12.");
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
        proposal.textContent = "Cheapest lever set that meets it under this demand: " +
          (data.proposal.levers.length ? data.proposal.levers.join(", ") : "none needed") +
          " — cost " + whole(data.proposal.cost) + " " + config.currency +
          " (one-time + 12 × monthly); EBITDA " + whole(data.proposal.projected.ebitda_per_month) +
          " " + config.perMonth + ".";
      } else {
        proposal.textContent = "No lever set meets it: " + data.proposal.message + ".";
      }
      box.appendChild(proposal);
    }
  }

  function render(data) {
    var m = data.measured, p = data.projected;
    setText("scenario-demand-label", "Demand: " + data.demand_label + ".");
    renderPools(data.pools);
    renderSeries(data);
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
        pct(high.tfi) + ", EBITDA " + config.perMonth + " " + whole(low.ebitda_per_month) + " – " +
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
  form.querySelectorAll("input[name=lever], #scenario-estimate, #scenario-demand, #scenario-growth")
    .forEach(function (el) { el.addEventListener("change", schedule); });
  $("scenario-demand").addEventListener("change", function () {
    $("growth-field").hidden = $("scenario-demand").value !== "growth";
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
    $("scenario-demand").value = "measured";
    $("growth-field").hidden = true;
    schedule();
  });
})();
