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
  var ID_NOWRAP = 32; /* case ids up to this long stay on one line; longer ones wrap */
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
  var palette = ["#2457c5", "#c0392b", "#1e8449", "#b9770e", "#7d3c98", "#16a085", "#d35400",
    "#2c3e50", "#8e44ad", "#27ae60", "#e67e22", "#34495e"];
  var scattered = cases.filter(function (c) { return c.x !== null && c.x !== undefined; });
  function drawScatter(key) {
    var node = document.getElementById("scatter");
    if (!node || typeof Plotly === "undefined") return;
    var groups = {}, order = [];
    scattered.forEach(function (c) {
      var g = String(c[key]);
      if (!(g in groups)) { groups[g] = []; order.push(g); }
      groups[g].push(c);
    });
    order.sort(function (a, b) { return a.localeCompare(b, undefined, { numeric: true }); });
    var traces = order.map(function (g, i) {
      var members = groups[g];
      return {
        type: "scatter", mode: "markers", name: plain((key === "cl" ? "cluster " : "") + g),
        x: members.map(function (c) { return c.x; }),
        y: members.map(function (c) { return c.y; }),
        customdata: members.map(function (c) { return c.id; }),
        text: members.map(function (c) {
          return plain(c.p + " · " + c.c + " · " + c.s + " · " + c.st + " (risk " + fmt(c.r) + ")");
        }),
        hovertemplate: "%{text}<extra></extra>",
        marker: { size: 7, opacity: 0.8, color: palette[i % palette.length] }
      };
    });
    Plotly.react(node, traces, {
      margin: { l: 30, r: 10, t: 10, b: 30 }, hovermode: "closest",
      legend: { orientation: "h" }, xaxis: { zeroline: false }, yaxis: { zeroline: false }
    }, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] });
    if (!node.dataset.bound) {
      node.on("plotly_click", function (ev) {
        if (ev.points && ev.points.length) openCase(ev.points[0].customdata);
      });
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
      return [c.id, c.p, c.c, c.t, c.in, c.out, c.ex].some(function (s) {
        return s && String(s).toLowerCase().indexOf(q) !== -1;
      });
    });
    sortRows();
    state.page = 0;
    renderTable();
  }
  function sortRows() {
    if (!state.sortKey) return;
    var k = state.sortKey, d = state.sortDir;
    state.rows.sort(function (a, b) {
      var x = a[k], y = b[k];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true })) * d;
    });
  }
  function renderTable() {
    var pages = Math.max(1, Math.ceil(state.rows.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var frag = document.createDocumentFragment();
    state.rows.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (c) {
      var tr = el("tr");
      tr.dataset.case = c.id;
      tr.appendChild(el("td", c.id, c.id.length <= ID_NOWRAP ? "id" : null));
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
  document.querySelectorAll("#case-table th[data-key]").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.dataset.key;
      state.sortDir = state.sortKey === k ? -state.sortDir : (k === "r" || k === "w" ? -1 : 1);
      state.sortKey = k;
      document.querySelectorAll("#case-table th").forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(state.sortDir > 0 ? "sorted-asc" : "sorted-desc");
      sortRows(); state.page = 0; renderTable();
    });
  });
  tbody.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr");
    if (tr && tr.dataset.case) openCase(tr.dataset.case);
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
    document.getElementById("cv-response").replaceChildren(highlighted(c.out, c.ev));
    document.getElementById("cv-cut").hidden = !c.cut;
    var list = document.getElementById("cv-evidence");
    list.replaceChildren();
    c.ev.forEach(function (s) {
      list.appendChild(el("li", s[2] + " · " + s[3] + " · “" + c.out.slice(s[0], s[1]) + "”"));
    });
    if (!c.ev.length) list.appendChild(el("li", "none"));
    var err = document.getElementById("cv-error");
    err.hidden = !c.err;
    err.textContent = c.err ? shown("Error: " + c.err) : "";
    if (!dialog.open) dialog.showModal();
  }
  window.faultlineOpenCase = openCase;

  applyFilters();
})();
