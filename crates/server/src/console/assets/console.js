// The Linden console's script: small enhancements on top of pages that work without it, and
// the live dashboard's charts (SVG drawn here, no library). No inline handlers: the
// Content-Security-Policy allows this file only.
"use strict";

function confirmDangerous() {
  document.querySelectorAll("button.danger").forEach(function (b) {
    b.addEventListener("click", function (ev) {
      if (!window.confirm(b.textContent + "?")) { ev.preventDefault(); }
    });
  });
}

var SVG = "http://www.w3.org/2000/svg";
var KEEP = 60; // points per series

function el(name, attrs) {
  var e = document.createElementNS(SVG, name);
  Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
  return e;
}

// Draws `series` ({name: [numbers]}) as lines in `svg`, scaled to the largest value.
function draw(svg, series, legendId) {
  while (svg.firstChild) { svg.removeChild(svg.firstChild); }
  var names = Object.keys(series);
  var max = 0;
  names.forEach(function (n) { series[n].forEach(function (v) { if (v > max) { max = v; } }); });
  if (max <= 0) { max = 1; }
  var W = 600, H = 200, L = 48, B = 16;
  for (var i = 0; i <= 4; i++) {
    var y = B + (H - 2 * B) * i / 4;
    svg.appendChild(el("line", { x1: L, x2: W, y1: y, y2: y, "class": "grid" }));
    var t = el("text", { x: 2, y: y + 4 });
    t.textContent = formatNumber(max * (4 - i) / 4);
    svg.appendChild(t);
  }
  names.forEach(function (n, k) {
    var pts = series[n].map(function (v, j) {
      var x = L + (W - L) * j / (KEEP - 1);
      var y = H - B - (H - 2 * B) * v / max;
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    svg.appendChild(el("polyline", { points: pts.join(" "), "class": "s" + (k % 8) }));
  });
  if (legendId) {
    var ul = document.getElementById(legendId);
    ul.textContent = "";
    names.forEach(function (n, k) {
      var li = document.createElement("li");
      var sw = document.createElement("span");
      sw.className = "swatch s" + (k % 8);
      li.appendChild(sw);
      var last = series[n][series[n].length - 1];
      li.appendChild(document.createTextNode(n + " " + formatNumber(last)));
      ul.appendChild(li);
    });
  }
}

function formatNumber(v) {
  if (v === undefined || isNaN(v)) { return "–"; }
  if (v >= 100) { return Math.round(v).toString(); }
  return (Math.round(v * 10) / 10).toString();
}

function push(arr, v) {
  arr.push(v);
  while (arr.length > KEEP) { arr.shift(); }
  return arr;
}

function figure(entries, dn, attr) {
  var e = entries[dn.toLowerCase()];
  if (!e) { return undefined; }
  var v = parseFloat(e[attr]);
  return isNaN(v) ? undefined : v;
}

function dashboard(root) {
  var src = root.getAttribute("data-source");
  var every = parseInt(root.getAttribute("data-interval"), 10) || 2000;
  var status = document.getElementById("dash-status");
  var prev = null; // {t, ops: {type: completed}, batches}
  var hist = { ops: {}, conn: { open: [] }, batches: { batches: [] }, commit: { p50: [], p99: [] }, latency: {} };
  var updates = 0;

  // Adds `v` to series `name` of `group`; a series seen for the first time starts with zeros
  // for the updates before it, so that its points line up with the others'.
  function pushAligned(group, name, v) {
    if (!group[name]) { group[name] = []; for (var i = 0; i < Math.min(updates, KEEP - 1); i++) { group[name].push(0); } }
    push(group[name], v);
  }

  function fill(list) {
    var tbody = document.querySelector("#figures tbody");
    tbody.textContent = "";
    list.forEach(function (e) {
      var keys = Object.keys(e.a);
      if (keys.length === 0) { return; }
      var tr = document.createElement("tr");
      var th = document.createElement("td");
      th.textContent = e.dn.replace(/,cn=Monitor$/i, "");
      var td = document.createElement("td");
      td.textContent = keys.map(function (k) { return k + ": " + e.a[k]; }).join("  ·  ");
      tr.appendChild(th);
      tr.appendChild(td);
      tbody.appendChild(tr);
    });
  }

  function tick() {
    fetch(src, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      return r.json().then(function (body) { return { ok: r.ok, body: body }; });
    }).then(function (res) {
      if (!res.ok) {
        status.textContent = res.body.error || "The figures cannot be read.";
        status.className = "error";
        return;
      }
      var data = res.body;
      var byDn = {};
      var ops = {};
      var latency = {};
      data.entries.forEach(function (e) {
        byDn[e.dn.toLowerCase()] = e.a;
        var m = /^cn=([^,]+),cn=Operations,cn=Monitor$/i.exec(e.dn);
        if (m && e.a.monitorOpCompleted !== undefined) { ops[m[1]] = parseFloat(e.a.monitorOpCompleted); }
        // Types that completed operations and have a latency (not unbind, abandon).
        if (m && e.a.lindenP50 !== undefined && parseFloat(e.a.monitorOpCompleted) > 0) {
          latency[m[1] + " p50"] = parseFloat(e.a.lindenP50);
          latency[m[1] + " p99"] = parseFloat(e.a.lindenP99);
        }
      });
      var names = {};
      Object.keys(hist.latency).concat(Object.keys(latency)).forEach(function (k) { names[k] = true; });
      Object.keys(names).forEach(function (k) { pushAligned(hist.latency, k, latency[k] || 0); });
      var batches = figure(byDn, "cn=Batches,cn=Writer,cn=Monitor", "monitorCounter");
      if (prev) {
        var dt = Math.max((data.t - prev.t) / 1000, 0.001);
        var total = 0;
        Object.keys(ops).forEach(function (k) {
          var rate = Math.max((ops[k] - (prev.ops[k] || 0)) / dt, 0);
          total += rate;
          push(hist.ops[k] = hist.ops[k] || [], rate);
        });
        document.getElementById("ops-total-rate").textContent = formatNumber(total);
        var br = Math.max(((batches || 0) - (prev.batches || 0)) / dt, 0);
        push(hist.batches.batches, br);
        document.getElementById("batch-rate").textContent = formatNumber(br);
      }
      var conn = figure(byDn, "cn=Current,cn=Connections,cn=Monitor", "monitorCounter");
      push(hist.conn.open, conn || 0);
      document.getElementById("conn-now").textContent = formatNumber(conn);
      var p50 = figure(byDn, "cn=Commit Latency,cn=Writer,cn=Monitor", "lindenP50");
      var p99 = figure(byDn, "cn=Commit Latency,cn=Writer,cn=Monitor", "lindenP99");
      push(hist.commit.p50, p50 || 0);
      push(hist.commit.p99, p99 || 0);
      document.getElementById("commit-p50").textContent = formatNumber(p50);
      document.getElementById("commit-p99").textContent = formatNumber(p99);
      draw(document.getElementById("chart-ops"), hist.ops, "legend-ops");
      draw(document.getElementById("chart-conn"), hist.conn);
      draw(document.getElementById("chart-batches"), hist.batches);
      draw(document.getElementById("chart-commit"), hist.commit, "legend-commit");
      draw(document.getElementById("chart-latency"), hist.latency, "legend-latency");
      fill(data.entries);
      prev = { t: data.t, ops: ops, batches: batches };
      updates += 1;
      root.setAttribute("data-updates", String(updates));
      status.textContent = "Updated " + new Date(data.t).toLocaleTimeString() + ".";
      status.className = "";
    }).catch(function (err) {
      status.textContent = "The figures cannot be read: " + err;
      status.className = "error";
    }).then(function () {
      window.setTimeout(tick, every);
    });
  }
  tick();
}

// The tree: a disclosure button per entry with children, which loads the children in place
// (the tree page of that entry, /tree?dn=…, read for its list: the same paged search, 100 at
// a time) with a "more…" button for each further page. Without this script the "children"
// links lead to those pages.
function enhanceTree(ul) {
  Array.prototype.forEach.call(ul.children, function (li) {
    if (li.tagName !== "LI" || li.getAttribute("data-enhanced")) { return; }
    li.setAttribute("data-enhanced", "1");
    var link = li.querySelector(":scope > a[href^='/tree?']");
    if (!link) { return; }
    var name = (li.querySelector(":scope > a") || link).textContent;
    var mark = li.querySelector(":scope > .mark");
    var button = document.createElement("button");
    button.type = "button";
    button.className = "disclosure";
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-label", "Show the children of " + name);
    button.textContent = "▸";
    if (mark) { li.replaceChild(button, mark); } else { li.insertBefore(button, li.firstChild); }
    var list = null;
    button.addEventListener("click", function () {
      if (list) {
        var open = button.getAttribute("aria-expanded") === "true";
        list.hidden = open;
        button.setAttribute("aria-expanded", open ? "false" : "true");
        button.textContent = open ? "▸" : "▾";
        return;
      }
      list = document.createElement("ul");
      list.className = "tree";
      list.setAttribute("aria-label", "Children of " + name);
      li.appendChild(list);
      button.setAttribute("aria-expanded", "true");
      button.textContent = "▾";
      loadInto(list, link.getAttribute("href"));
    });
  });
}

// Appends the entries of tree page `href` to `list`, and a "more…" button for the next page.
function loadInto(list, href) {
  var status = document.createElement("li");
  status.className = "hint";
  status.setAttribute("role", "status");
  status.textContent = "Loading…";
  list.appendChild(status);
  fetch(href, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
    return r.text().then(function (t) { return { ok: r.ok, text: t }; });
  }).then(function (res) {
    var doc = new DOMParser().parseFromString(res.text, "text/html");
    var src = doc.querySelector("main ul.tree") || doc.querySelector("ul.tree");
    list.removeChild(status);
    if (!res.ok || !src) {
      var err = document.createElement("li");
      err.className = "error";
      err.setAttribute("role", "alert");
      err.textContent = "The children cannot be shown: " + (doc.title || "error");
      list.appendChild(err);
      return;
    }
    Array.prototype.slice.call(src.children).forEach(function (li) {
      list.appendChild(document.importNode(li, true));
    });
    enhanceTree(list);
    var next = doc.querySelector("a[rel=next]");
    if (next) {
      var more = document.createElement("li");
      var b = document.createElement("button");
      b.type = "button";
      b.className = "small more";
      b.textContent = "more…";
      b.addEventListener("click", function () {
        list.removeChild(more);
        loadInto(list, next.getAttribute("href"));
      });
      more.appendChild(b);
      list.appendChild(more);
    }
  }).catch(function (err) {
    status.textContent = "The children cannot be shown: " + err;
    status.className = "error";
  });
}

document.addEventListener("DOMContentLoaded", function () {
  confirmDangerous();
  document.querySelectorAll("main ul.tree").forEach(enhanceTree);
  var d = document.getElementById("dashboard");
  if (d) { dashboard(d); }
});
