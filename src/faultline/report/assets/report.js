/* faultline report.html: the scatter, the case table and the case view.
 * Every string from the report is model output or user input: it reaches the page through
 * textContent or Plotly's text (which escapes), never through innerHTML. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("faultline-data").textContent);
  var cases = data.cases;
  var byId = {};
  cases.forEach(function (c) { byId[c.id] = c; });
  var PAGE = 100;
  var ID_CHARS = 32; /* where there is room, a case id up to this long keeps to one line */
  var state = { sortKey: null, sortDir: 1, page: 0, rows: cases.slice() };

  /* Control characters shown as escapes, as faultline._util.text.visible does on the server:
   * C0 and C1 controls but tab, line feed and carriage return, and the characters that reorder
   * or hide text (bidirectional embeddings, overrides and isolates, zero-width space, BOM). */
  var HIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u202a-\u202e\u2066-\u2069\ufeff]/g;
  function shown(s) {
    return String(s).replace(HIDDEN, function (ch) {
      var code = ch.charCodeAt(0);
      return code < 0x100 ? "\\x" + ("0" + code.toString(16)).slice(-2)
        : "\\u" + ("000" + code.toString(16)).slice(-4);
    });
  }
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = shown(text);
    if (cls) node.className = cls;
    return node;
  }
  function fmt(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(3); }
  /* Plotly reads a few HTML tags in labels; entities make every character literal. */
  function plain(s) {
    return shown(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  /* ---- scatter ---------------------------------------------------------------------- */
  /* Colours that mean something use the page's own: an outcome is drawn in the colour the
   * status column and the bars give it (--pass, --fail, --error), a severity in the ordered
   * ramp of the severity pills (--sev-low ... --sev-critical, light to dark), in tier order.
   *
   * Clusters and categories are nominal and unbounded (the demo has 26 categories). About ten
   * hues are as many as a reader tells apart, so, as Tableau and Vega do, a group is told by
   * its colour and, past the ten colours, by its marker's shape as well: the first ten groups
   * are circles in the ten colours of Tableau 10 (its grey swapped for an indigo: grey means
   * "other" here), the next ten squares in the same colours, and
   * so on through six shapes. No two groups share a colour and a shape. Past 60 groups the
   * smallest are drawn in grey as one "N other categories" entry, which says how many; the
   * hover label of each of its points still names its group. */
  var TABLEAU10 = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#6b6ecf"];
  var SHAPES = ["circle", "square", "diamond", "triangle-up", "triangle-down", "cross"];
  var OTHER = "#b0b4bb";
  var SEVERITIES = ["low", "medium", "high", "critical"];
  var OUTCOMES = ["pass", "fail", "error"];
  var LEGEND_CHARS = 32; /* a longer name is cut in the legend; its title holds all of it */
  function cssColour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  /* The rank of a value in a fixed order (severity, outcome); unknown values sort last. */
  function rank(order, v) { var i = order.indexOf(v); return i === -1 ? order.length : i; }
  var ORDERS = { s: SEVERITIES, st: OUTCOMES };
  function byName(a, b) { return a.localeCompare(b, undefined, { numeric: true }); }
  function shortened(s) {
    var text = shown(s);
    return text.length > LEGEND_CHARS ? text.slice(0, LEGEND_CHARS - 1) + "…" : text;
  }

  var scattered = cases.filter(function (c) { return c.x !== null && c.x !== undefined; });
  function scatterGroups(key) {
    /* [{name, members, colour, symbol}], in legend order. */
    var groups = {}, order = [];
    scattered.forEach(function (c) {
      var g = String(c[key]);
      if (!(g in groups)) { groups[g] = []; order.push(g); }
      groups[g].push(c);
    });
    var fixed = ORDERS[key];
    if (fixed) {
      order.sort(function (a, b) { return rank(fixed, a) - rank(fixed, b) || byName(a, b); });
      return order.map(function (g) {
        var colour = cssColour(key === "s" ? "--sev-" + g : "--" + g) || OTHER;
        return { name: g, members: groups[g], colour: colour, symbol: "circle" };
      });
    }
    var slots = TABLEAU10.length * SHAPES.length;
    var kept = order;
    var rest = [];
    if (order.length > slots) {
      var bySize = order.slice().sort(function (a, b) {
        return groups[b].length - groups[a].length || byName(a, b);
      });
      kept = bySize.slice(0, slots - 1);
      rest = bySize.slice(slots - 1);
    }
    kept.sort(byName);
    var out = kept.map(function (g, i) {
      return {
        name: (key === "cl" ? "cluster " : "") + g, members: groups[g],
        colour: TABLEAU10[i % TABLEAU10.length],
        symbol: SHAPES[Math.floor(i / TABLEAU10.length) % SHAPES.length]
      };
    });
    if (rest.length) {
      var noun = key === "cl" ? "clusters" : "categories";
      out.push({
        name: rest.length + " other " + noun + " (grey)",
        members: [].concat.apply([], rest.map(function (g) { return groups[g]; })),
        colour: OTHER, symbol: "circle"
      });
    }
    return out;
  }
  function hoverText(c) {
    var who = "probe " + c.p + " · sample " + c.k + (c.m ? " · model " + c.m : "");
    return plain(c.id) + "<br>" + plain(who) + "<br>" +
      plain(c.c + " · " + c.s + " · " + c.st + " (risk " + fmt(c.r) + ")");
  }
  function legendTitles(node, groups) {
    /* Each legend entry carries its group's full name as an SVG <title> (a tooltip). */
    var items = node.querySelectorAll(".legend .traces");
    if (items.length !== groups.length) return;
    items.forEach(function (item, i) {
      var title = item.querySelector(":scope > title");
      if (!title) {
        title = document.createElementNS("http://www.w3.org/2000/svg", "title");
        item.insertBefore(title, item.firstChild);
      }
      title.textContent = shown(groups[i].name);
    });
  }
  var drawn = [];
  function drawScatter(key) {
    var node = document.getElementById("scatter");
    if (!node || typeof Plotly === "undefined") return;
    var groups = scatterGroups(key);
    drawn = groups;
    var traces = groups.map(function (g) {
      var members = g.members;
      return {
        type: "scatter", mode: "markers", name: plain(shortened(g.name)),
        x: members.map(function (c) { return c.x; }),
        y: members.map(function (c) { return c.y; }),
        customdata: members.map(function (c) { return c.id; }),
        text: members.map(hoverText),
        hovertemplate: "%{text}<extra></extra>",
        marker: { size: 7, opacity: 0.85, color: g.colour, symbol: g.symbol,
          line: { width: 0.5, color: "rgba(29, 35, 48, .45)" } }
      };
    });
    /* Beside the chart when there is room (a long list scrolls there), below it on a phone;
     * either way the legend never takes more than its share of the chart's height. */
    var wide = node.clientWidth >= 760;
    var legend = wide ? { orientation: "v", x: 1.01, y: 1, yanchor: "top" }
      : { orientation: "h", maxheight: 0.3 };
    Plotly.react(node, traces, {
      margin: { l: 30, r: 10, t: 10, b: 30 }, hovermode: "closest", legend: legend,
      xaxis: { zeroline: false }, yaxis: { zeroline: false }
    }, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] });
    legendTitles(node, groups);
    if (!node.dataset.bound) {
      node.on("plotly_click", function (ev) {
        if (ev.points && ev.points.length) openCase(ev.points[0].customdata);
      });
      node.on("plotly_afterplot", function () { legendTitles(node, drawn); });
      /* Printing lays the page out again at the paper's width; the chart follows it there
       * and back, so that it is not cut at the page's right edge. */
      var print = window.matchMedia ? window.matchMedia("print") : null;
      if (print && print.addEventListener) {
        print.addEventListener("change", function (ev) {
          Plotly.relayout(node, ev.matches ? { width: node.clientWidth, height: node.clientHeight }
            : { width: null, height: null, autosize: true });
        });
      }
      node.dataset.bound = "1";
    }
  }
  var colourBy = document.getElementById("colour-by");
  if (colourBy) {
    colourBy.addEventListener("change", function () { drawScatter(colourBy.value); });
    drawScatter(colourBy.value);
  }

  /* ---- case table ------------------------------------------------------------------- */
  var tbody = document.querySelector("#case-table tbody");
  var filters = ["f-status", "f-category", "f-severity", "f-cluster"].map(function (id) {
    return document.getElementById(id);
  });
  var keys = ["st", "c", "s", "cl"];
  /* A category option's value is its index in data.categories: the raw text is compared. */
  var named = [null, data.categories, null, null];
  var search = document.getElementById("search");

  function wanted(i) {
    var value = filters[i].value;
    if (value === "" || !named[i]) return value;
    return named[i][Number(value)];
  }
  function applyFilters() {
    var q = search.value.trim().toLowerCase();
    var wants = filters.map(function (f, i) { return wanted(i); });
    state.rows = cases.filter(function (c) {
      for (var i = 0; i < filters.length; i++) {
        if (wants[i] !== "" && String(c[keys[i]]) !== wants[i]) return false;
      }
      if (!q) return true;
      return [c.id, c.p, c.c, c.t, c.in, c.out, c.rs, c.ex].some(function (s) {
        return s && String(s).toLowerCase().indexOf(q) !== -1;
      });
    });
    sortRows();
    state.page = 0;
    renderTable();
  }
  function sortRows() {
    if (!state.sortKey) return;
    var k = state.sortKey, d = state.sortDir, fixed = ORDERS[k];
    state.rows.sort(function (a, b) {
      var x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      /* Severities and outcomes sort in their own order (low to critical), not by name. */
      if (fixed) return (rank(fixed, x) - rank(fixed, y) || byName(String(x), String(y))) * d;
      return (typeof x === "number" ? x - y : byName(String(x), String(y))) * d;
    });
  }
  function renderTable() {
    var pages = Math.max(1, Math.ceil(state.rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var frag = document.createDocumentFragment();
    state.rows.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (c) {
      var tr = el("tr");
      tr.dataset.case = c.id;
      tr.tabIndex = 0; /* reachable with Tab; Enter or Space opens the case, as a click does */
      var id = el("td", c.id, "id");
      id.style.setProperty("--id-ch", String(Math.min(c.id.length, ID_CHARS) + 1));
      tr.appendChild(id);
      tr.appendChild(el("td", c.c));
      tr.appendChild(el("td", c.s));
      tr.appendChild(el("td", c.st, "status-" + c.st));
      tr.appendChild(el("td", fmt(c.r), "n"));
      tr.appendChild(el("td", fmt(c.w), "n"));
      tr.appendChild(el("td", c.cl === null || c.cl === undefined ? "–" : c.cl, "n"));
      tr.appendChild(el("td", c.ex.length > 180 ? c.ex.slice(0, 180) + "…" : c.ex, "text"));
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    document.getElementById("count").textContent =
      state.rows.length + " of " + cases.length + " cases";
    document.getElementById("page").textContent = "page " + (state.page + 1) + " of " + pages;
  }
  search.addEventListener("input", applyFilters);
  filters.forEach(function (f) { f.addEventListener("change", applyFilters); });
  document.getElementById("prev").addEventListener("click", function () {
    state.page = Math.max(0, state.page - 1); renderTable();
  });
  document.getElementById("next").addEventListener("click", function () {
    state.page += 1; renderTable();
  });
  /* Each sortable header holds a button (the template's), so it is reached with Tab and
   * pressed with Enter or Space; the header's aria-sort says how the rows are ordered. */
  var headers = document.querySelectorAll("#case-table th[data-key]");
  headers.forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.dataset.key;
      state.sortDir = state.sortKey === k ? -state.sortDir : (k === "r" || k === "w" ? -1 : 1);
      state.sortKey = k;
      headers.forEach(function (h) {
        h.classList.remove("sorted-asc", "sorted-desc");
        h.removeAttribute("aria-sort");
      });
      th.classList.add(state.sortDir > 0 ? "sorted-asc" : "sorted-desc");
      th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
      sortRows(); state.page = 0; renderTable();
    });
  });
  tbody.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr");
    if (tr && tr.dataset.case) openCase(tr.dataset.case);
  });
  tbody.addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter" && ev.key !== " ") return;
    var tr = ev.target.closest("tr");
    if (!tr || ev.target !== tr || !tr.dataset.case) return;
    ev.preventDefault(); /* Space would scroll the page */
    openCase(tr.dataset.case);
  });
  document.querySelectorAll("a.open-case").forEach(function (a) {
    a.addEventListener("click", function (ev) { ev.preventDefault(); openCase(a.dataset.case); });
  });

  /* ---- case view -------------------------------------------------------------------- */
  var dialog = document.getElementById("case-view");
  function highlighted(text, evidence) {
    /* The response as text nodes, with each evidence span (non-overlapping, first wins) in a
     * <mark> whose class is its kind. */
    var frag = document.createDocumentFragment();
    var spans = evidence.slice().sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var at = 0;
    spans.forEach(function (s) {
      var start = s[0], end = Math.min(s[1], text.length);
      if (start < at || start >= end) return;
      if (start > at) frag.appendChild(document.createTextNode(shown(text.slice(at, start))));
      var mark = el("mark", text.slice(start, end), "k-" + s[2]);
      mark.title = s[3] + " (" + s[2] + ")";
      frag.appendChild(mark);
      at = end;
    });
    if (at < text.length) frag.appendChild(document.createTextNode(shown(text.slice(at))));
    return frag;
  }
  function openCase(id) {
    var c = byId[id];
    if (!c) return;
    document.getElementById("cv-title").textContent = shown(c.id);
    document.getElementById("cv-meta").textContent = shown(
      [c.c, c.s, "expects " + c.e, c.st, "risk " + fmt(c.r), "weighted " + fmt(c.w),
       c.m ? "model " + c.m : null, c.cl !== null && c.cl !== undefined ? "cluster " + c.cl : null,
       c.fm.length ? "modes: " + c.fm.join(", ") : null].filter(Boolean).join(" · "));
    document.getElementById("cv-explanation").textContent = shown(c.ex);
    document.getElementById("cv-task").textContent = shown(c.t);
    document.getElementById("cv-input").textContent = shown(c.in);
    var reasoningBox = document.getElementById("cv-reasoning-box");
    reasoningBox.hidden = !c.rs;
    reasoningBox.open = false;
    document.getElementById("cv-reasoning").textContent = c.rs
      ? shown(c.rs) + (c.rcut ? "\n… (cut here; the report's data has all of it)" : "") : "";
    document.getElementById("cv-response").replaceChildren(highlighted(c.out, c.ev));
    document.getElementById("cv-cut").hidden = !c.cut;
    var list = document.getElementById("cv-evidence");
    list.replaceChildren();
    c.ev.forEach(function (s) {
      list.appendChild(el("li", s[2] + " · " + s[3] + " · “" + c.out.slice(s[0], s[1]) + "”" +
        (s[4] ? " … (continues past the cut)" : "")));
    });
    if (c.evx) {
      list.appendChild(el("li", c.evx + " more evidence span" + (c.evx === 1 ? "" : "s") +
        " past the cut, not shown here", "note"));
    }
    if (!c.ev.length && !c.evx) list.appendChild(el("li", "none"));
    var err = document.getElementById("cv-error");
    err.hidden = !c.err;
    err.textContent = c.err ? shown("Error: " + c.err) : "";
    if (!dialog.open) dialog.showModal();
  }
  window.faultlineOpenCase = openCase;

  applyFilters();
})();
