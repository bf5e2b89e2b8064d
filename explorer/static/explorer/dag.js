/* The summary DAG: cytoscape renders, cytoscape-dagre lays out (the summaries built on
   others above, their sources below). Data comes from the page's json_script block. */
(function () {
  "use strict";
  var dataNode = document.getElementById("dag-data");
  if (!dataNode || typeof cytoscape === "undefined") return;
  var data = JSON.parse(dataNode.textContent);
  var detail = document.getElementById("detail");
  var onPath = new Set(data.path || []);

  function label(n) {
    var range = n.firstSeq ? "#" + n.firstSeq + "–#" + n.lastSeq : "";
    var kept = n.fidelity === null || n.fidelity === undefined ? "" : " · kept " + n.fidelity.toFixed(2);
    return (n.kind === "leaf" ? "leaf" : "d" + n.depth) + " " + range + "\n" + n.tokens + " tok" + kept;
  }

  var elements = [];
  data.nodes.forEach(function (n) {
    var classes = [n.kind];
    if (n.inContext) classes.push("in-context");
    if (onPath.has(n.id)) classes.push("path");
    if (n.id === data.covering) classes.push("covering");
    if (n.level !== "normal") classes.push(n.level);
    elements.push({ group: "nodes", data: { id: n.id, label: label(n), firstSeq: n.firstSeq || 0 }, classes: classes.join(" ") });
  });
  data.edges.forEach(function (e, i) {
    var classes = onPath.has(e.source) && onPath.has(e.target) ? "path" : "";
    // Drawn from the summary down to each of its sources ("summarizes"), top to bottom,
    // so dagre keeps the sources in chronological order left to right.
    elements.push({ group: "edges", data: { id: "e" + i, source: e.target, target: e.source }, classes: classes });
  });

  var cy = cytoscape({
    container: document.getElementById("dag"),
    elements: elements,
    wheelSensitivity: 0.3,
    minZoom: 0.005,
    maxZoom: 3,
    textureOnViewport: data.nodes.length > 300,
    hideEdgesOnViewport: data.nodes.length > 300,
    style: [
      { selector: "node", style: {
          shape: "round-rectangle", width: 96, height: 38, "background-color": "#dbe7f5",
          "border-width": 1, "border-color": "#7d93ad", label: "data(label)",
          "text-wrap": "wrap", "text-valign": "center", "font-size": 10, color: "#1d2733" } },
      { selector: "node.condensed", style: { "background-color": "#e6dcf5", "border-color": "#8d78ad" } },
      { selector: "node.fallback", style: { "background-color": "#f7e3c6" } },
      { selector: "node.in-context", style: { "border-width": 3, "border-color": "#1f7a3d" } },
      { selector: "node.path", style: { "background-color": "#ffe066", "border-color": "#b38600" } },
      { selector: "node.covering", style: { "border-width": 4, "border-color": "#c2410c" } },
      { selector: "node:selected", style: { "overlay-color": "#2563eb", "overlay-opacity": 0.25 } },
      { selector: "edge", style: {
          width: 1, "line-color": "#a7b1bd", "target-arrow-color": "#a7b1bd",
          "target-arrow-shape": "triangle", "curve-style": "bezier", "arrow-scale": 0.7 } },
      { selector: "edge.path", style: { width: 3, "line-color": "#b38600", "target-arrow-color": "#b38600" } },
    ],
    layout: { name: "dagre", rankDir: "TB", nodeSep: 12, rankSep: 50, animate: false },
  });
  window.lcmCy = cy; // for tests and the console

  // Read history left to right: dagre's crossing minimisation may leave the oldest leaf
  // on the right; if so, mirror the drawing (it stays a valid layered layout).
  var leaves = cy.nodes(".leaf").sort(function (a, b) { return a.data("firstSeq") - b.data("firstSeq"); });
  if (leaves.length > 1 && leaves.first().position("x") > leaves.last().position("x")) {
    cy.nodes().positions(function (node) { return { x: -node.position("x"), y: node.position("y") }; });
  }

  function url(template, id) { return template.replace("SUMMARY_ID", encodeURIComponent(id)); }

  function showDetail(id) {
    var node = cy.getElementById(id);
    if (node.empty()) return;
    cy.$(":selected").unselect();
    node.select();
    detail.setAttribute("aria-busy", "true");
    window.lcm.getHtml(url(data.detailUrl, id)).then(function (html) {
      detail.innerHTML = html;
      detail.removeAttribute("aria-busy");
    }, function (error) {
      detail.textContent = "Could not load " + id + ": " + error.message;
    });
  }

  cy.on("tap", "node", function (event) { showDetail(event.target.id()); });

  detail.addEventListener("click", function (event) {
    var link = event.target.closest(".node-link");
    if (link) {
      event.preventDefault();
      var node = cy.getElementById(link.dataset.summary);
      if (!node.empty()) cy.animate({ center: { eles: node } }, { duration: 200 });
      showDetail(link.dataset.summary);
      return;
    }
    var button = event.target.closest("button.expand");
    if (!button) return;
    var id = button.dataset.summary;
    var target = detail.querySelector('.expansion[data-for="' + CSS.escape(id) + '"]');
    button.disabled = true;
    window.lcm.getHtml(url(data.expandUrl, id)).then(function (html) {
      target.innerHTML = html;
    }, function (error) {
      target.textContent = "Could not expand: " + error.message;
      button.disabled = false;
    });
  });

  // The page opens fitted to the view (what "Fit all" gives), and stays fitted while the
  // page settles (the detail panel filling in, a window resize) until the user moves the
  // view: from then on their zoom and pan are kept. "Fit all" and "Context" switch views.
  var PADDING = 20;
  var userMoved = false;
  function fitAllNodes() { cy.fit(undefined, PADDING); }
  function readableView(eles) {
    if (eles.empty()) eles = cy.nodes();
    cy.fit(eles, 40);
    var zoom = Math.min(Math.max(cy.zoom(), MIN_READABLE), MAX_COMFORT);
    if (zoom !== cy.zoom()) {
      cy.zoom(zoom);
      cy.center(eles);
    }
  }
  var MIN_READABLE = 0.8, MAX_COMFORT = 1.2;
  var container = cy.container();
  ["wheel", "mousedown", "touchstart", "keydown"].forEach(function (name) {
    container.addEventListener(name, function () { userMoved = true; }, { passive: true });
  });
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(function () {
      cy.resize();
      if (!userMoved) fitAllNodes();
    }).observe(container);
  }
  fitAllNodes();
  var first = data.selected || (onPath.size ? data.path[0] : null);
  if (first && !cy.getElementById(first).empty()) showDetail(first);

  var fitAll = document.getElementById("dag-fit");
  if (fitAll) fitAll.addEventListener("click", function () { fitAllNodes(); });
  var toContext = document.getElementById("dag-context");
  if (toContext) toContext.addEventListener("click", function () {
    userMoved = true;
    readableView(cy.nodes(".in-context"));
  });
  window.lcmDagView = { userMoved: function () { return userMoved; } }; // for tests
  document.body.dataset.dagReady = "true";
})();
