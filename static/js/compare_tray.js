// The compare tray: runs picked on the runs list (a box per row) and on run pages ("+ compare"),
// kept in localStorage so the pick survives pages, filters, reloads and other tabs. A sticky bar
// at the bottom lists them (remove one, clear all) and links to /compare/?runs=a,b,c once two or
// more are picked. It holds at most as many runs as the compare page takes (data-max-runs, 12):
// the tray says so, and a pick beyond it is refused with a note in the tray.
//
// Without this script the row boxes are a plain GET form to the compare page and the run page's
// "+ compare" button stays hidden. The page's Content Security Policy allows no inline script or
// handler: the URLs come from this tag's data-* attributes, the rows mark themselves with
// data-compare-run / data-compare-toggle.
(function () {
  "use strict";
  var KEY = "holodeck.compareTray";
  var script = document.currentScript;
  var compareUrl = (script && script.getAttribute("data-compare-url")) || "/compare/";
  var runsUrl = (script && script.getAttribute("data-runs-url")) || "/runs/";
  var maxRuns = Number(script && script.getAttribute("data-max-runs")) || 12;
  var refused = null; // the run last refused because the tray was full (its note is shown)
  var memory = []; // the pick when localStorage is unavailable (private mode, disabled storage)
  var tray = null;

  // --- the stored pick -------------------------------------------------------------------------

  function clean(values) {
    var ids = [];
    if (!Array.isArray(values)) return ids;
    values.forEach(function (value) {
      var id = Number(value);
      if (Number.isSafeInteger(id) && id > 0 && ids.indexOf(id) === -1) ids.push(id);
    });
    return ids;
  }

  function load() {
    try {
      var raw = window.localStorage.getItem(KEY);
      return (raw === null ? memory.slice() : clean(JSON.parse(raw))).slice(0, maxRuns);
    } catch (err) {
      return memory.slice(0, maxRuns);
    }
  }

  function save(ids) {
    memory = ids.slice();
    try {
      window.localStorage.setItem(KEY, JSON.stringify(ids));
    } catch (err) {
      // Storage full or refused: the pick lasts as long as the page.
    }
    render();
  }

  function add(id) {
    var ids = load();
    if (ids.indexOf(id) !== -1) return;
    if (ids.length >= maxRuns) {
      refused = id; // the box unticks itself again on render
      render();
      return;
    }
    ids.push(id);
    save(ids);
  }

  function remove(id) {
    refused = null;
    save(load().filter(function (other) { return other !== id; }));
  }

  // --- the page --------------------------------------------------------------------------------

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text) node.textContent = text;
    return node;
  }

  function buildTray() {
    var box = el("aside", { id: "compare-tray", "class": "compare-tray", "aria-label": "Runs to compare" });
    box.hidden = true;
    box.appendChild(el("span", { "class": "tray-title" }, "Compare tray"));
    box.appendChild(el("span", { "class": "tray-limit small" }));
    box.appendChild(el("ul", { "class": "tray-chips" }));
    box.appendChild(el("span", { "class": "tray-full", role: "status" }));
    box.appendChild(el("button", { type: "button", "class": "btn-link tray-clear", "data-compare-clear": "" }, "Clear"));
    box.appendChild(el("a", { "class": "btn btn-small tray-go", "data-compare-go": "" }));
    document.body.appendChild(box);
    return box;
  }

  function chip(id) {
    var item = el("li", { "class": "tray-chip", "data-tray-run": String(id) });
    item.appendChild(el("a", { href: runsUrl + id + "/" }, "#" + id));
    item.appendChild(el("button", {
      type: "button",
      "class": "tray-remove",
      "data-compare-remove": String(id),
      "aria-label": "remove run #" + id + " from the compare tray",
      title: "remove",
    }, "×"));
    return item;
  }

  function renderTray(ids) {
    tray = tray || buildTray();
    tray.hidden = ids.length === 0;
    var chips = tray.querySelector(".tray-chips");
    chips.replaceChildren.apply(chips, ids.map(chip));
    tray.querySelector(".tray-limit").textContent = ids.length + " of at most " + maxRuns + " runs";
    var full = tray.querySelector(".tray-full");
    if (refused !== null && ids.length >= maxRuns && ids.indexOf(refused) === -1) {
      full.textContent = "Run #" + refused + " not added: the tray holds at most " + maxRuns +
        " runs (the compare page's limit); remove one first.";
    } else {
      refused = null;
      full.textContent = "";
    }
    var go = tray.querySelector("[data-compare-go]");
    go.textContent = "Compare " + ids.length + " run" + (ids.length === 1 ? "" : "s");
    if (ids.length >= 2) {
      go.setAttribute("href", compareUrl + "?runs=" + ids.join(","));
      go.removeAttribute("aria-disabled");
      go.removeAttribute("title");
    } else {
      go.removeAttribute("href");
      go.setAttribute("aria-disabled", "true");
      go.setAttribute("title", "pick at least two runs");
    }
  }

  function render() {
    var ids = load();
    document.querySelectorAll("input[data-compare-run]").forEach(function (box) {
      box.checked = ids.indexOf(Number(box.getAttribute("data-compare-run"))) !== -1;
    });
    document.querySelectorAll("[data-compare-toggle]").forEach(function (button) {
      var picked = ids.indexOf(Number(button.getAttribute("data-compare-toggle"))) !== -1;
      button.hidden = false;
      button.setAttribute("aria-pressed", picked ? "true" : "false");
      button.textContent = picked ? "✓ in compare tray" : "+ compare";
      if (!picked && ids.length >= maxRuns) {
        button.setAttribute("title", "the compare tray holds at most " + maxRuns + " runs");
      } else {
        button.removeAttribute("title");
      }
    });
    document.querySelectorAll("[data-compare-fallback]").forEach(function (node) {
      node.hidden = true; // the tray does what the plain form's button did
    });
    renderTray(ids);
  }

  document.addEventListener("change", function (evt) {
    var box = evt.target.closest && evt.target.closest("input[data-compare-run]");
    if (!box) return;
    var id = Number(box.getAttribute("data-compare-run"));
    if (box.checked) add(id); else remove(id);
  });

  document.addEventListener("click", function (evt) {
    var target = evt.target.closest ? evt.target : null;
    if (!target) return;
    var toggle = target.closest("[data-compare-toggle]");
    var removeButton = target.closest("[data-compare-remove]");
    if (toggle) {
      var id = Number(toggle.getAttribute("data-compare-toggle"));
      if (load().indexOf(id) === -1) add(id); else remove(id);
    } else if (removeButton) {
      remove(Number(removeButton.getAttribute("data-compare-remove")));
    } else if (target.closest("[data-compare-clear]")) {
      refused = null;
      save([]);
    }
  });

  // Another tab changed the pick; htmx swapped in a new run header (its button starts hidden).
  window.addEventListener("storage", function (evt) {
    if (evt.key === KEY || evt.key === null) render();
  });
  document.addEventListener("htmx:load", render);

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", render);
  } else {
    render();
  }
})();
