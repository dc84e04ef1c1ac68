// Transcripts (templates/runs/_transcript.html): copy buttons on texts, args and results, and
// the search box that filters a transcript's events and marks the text found. Transcripts are
// loaded by htmx when a turn's "Transcript" section is opened, so every handler is delegated
// from the document. No inline handlers (CSP). Without this script the texts stay selectable
// and the copy buttons stay hidden (.tx-js shows them).
(function () {
  "use strict";
  document.documentElement.classList.add("tx-js");

  // --- copy --------------------------------------------------------------------------------

  function copyByHand(text) {
    // Outside a secure context (a dashboard served over plain HTTP) there is no Clipboard API.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var done = false;
    try {
      done = document.execCommand("copy");
    } catch (err) {
      done = false;
    }
    document.body.removeChild(area);
    return done ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return copyByHand(text);
      });
    }
    return copyByHand(text);
  }

  function say(button, text) {
    var scope = button.closest("[data-tx-scope]");
    var status = scope && scope.querySelector("[data-tx-copy-status]");
    if (status) status.textContent = text;
  }

  function copy(button) {
    var field = button.closest(".tx-field");
    var source = field && field.querySelector("[data-tx-copy-source]");
    if (!source) return;
    var label = button.getAttribute("aria-label") || "Copy";
    copyText(source.textContent).then(
      function () {
        button.textContent = "Copied";
        say(button, label.replace(/^Copy/, "Copied"));
        window.setTimeout(function () {
          button.textContent = "Copy";
        }, 1500);
      },
      function () {
        say(button, "Copy failed: select the text and copy it by hand.");
      }
    );
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-tx-copy]");
    if (button) copy(button);
  });

  // --- search ------------------------------------------------------------------------------

  function unmark(scope) {
    scope.querySelectorAll("mark.tx-hit").forEach(function (hit) {
      var parent = hit.parentNode;
      parent.replaceChild(document.createTextNode(hit.textContent), hit);
      parent.normalize();
    });
  }

  function textNodes(root) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        var parent = node.parentElement;
        if (!parent || parent.closest("button, .sr-only, summary")) return NodeFilter.FILTER_REJECT;
        return NodeFilter.FILTER_ACCEPT;
      },
    });
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    return nodes;
  }

  function markIn(node, needle) {
    var text = node.nodeValue;
    var lower = text.toLowerCase();
    var at = lower.indexOf(needle);
    if (at === -1) return 0;
    var count = 0;
    var fragment = document.createDocumentFragment();
    var from = 0;
    while (at !== -1) {
      fragment.appendChild(document.createTextNode(text.slice(from, at)));
      var hit = document.createElement("mark");
      hit.className = "tx-hit";
      hit.textContent = text.slice(at, at + needle.length);
      fragment.appendChild(hit);
      count += 1;
      from = at + needle.length;
      at = lower.indexOf(needle, from);
    }
    fragment.appendChild(document.createTextNode(text.slice(from)));
    node.parentNode.replaceChild(fragment, node);
    return count;
  }

  function reveal(item) {
    // A hit inside a collapsed system prompt or a long text behind "show all": open it.
    item.querySelectorAll("mark.tx-hit").forEach(function (hit) {
      for (var box = hit.closest("details"); box; box = box.parentElement.closest("details")) {
        if (!box.closest("[data-tx-item]")) break;
        box.open = true;
      }
      var clamp = hit.closest(".tx-clamp");
      var more = clamp && clamp.querySelector(".tx-more");
      if (more) more.open = true;
    });
  }

  function search(box) {
    var scope = box.closest("[data-tx-scope]");
    if (!scope) return;
    var needle = box.value.trim().toLowerCase();
    var items = scope.querySelectorAll("[data-tx-item]");
    var status = scope.querySelector("[data-tx-search-status]");
    unmark(scope);
    var shown = 0;
    items.forEach(function (item) {
      var hits = 0;
      if (needle) {
        textNodes(item).forEach(function (node) {
          hits += markIn(node, needle);
        });
      }
      item.hidden = Boolean(needle) && hits === 0;
      if (hits) reveal(item);
      if (!item.hidden) shown += 1;
    });
    if (status) {
      status.textContent = !needle
        ? ""
        : shown
          ? shown + " of " + items.length + " events match “" + box.value.trim() + "”"
          : "No event matches “" + box.value.trim() + "”";
    }
  }

  // A transcript that failed to load says so in its section, instead of "Loading…" forever.
  function failed(evt, cause) {
    var target = evt.detail && evt.detail.target;
    if (!target || !target.classList || !target.classList.contains("tx-body")) return;
    target.textContent = "";
    var note = document.createElement("p");
    note.className = "tx-none";
    note.setAttribute("role", "alert");
    note.textContent = "Could not load the transcript (" + cause + "): reload the page to retry.";
    target.appendChild(note);
  }
  document.addEventListener("htmx:responseError", function (evt) {
    var xhr = evt.detail && evt.detail.xhr;
    failed(evt, "HTTP " + (xhr ? xhr.status : "error"));
  });
  document.addEventListener("htmx:sendError", function (evt) {
    failed(evt, "network error");
  });

  // --- the case's search: every turn's transcript at once ---------------------------------

  function caseBox() {
    return document.querySelector("[data-tx-case-search]");
  }

  function caseStatus() {
    var box = caseBox();
    var status = document.querySelector("[data-tx-case-status]");
    if (!box || !status) return;
    var needle = box.value.trim();
    if (!needle) {
      status.textContent = "";
      return;
    }
    var loading = document.querySelectorAll("details.tx-section[open] .tx-body > p.muted").length;
    var events = 0;
    var turns = 0;
    document.querySelectorAll("[data-tx-scope]").forEach(function (scope) {
      var shown = scope.querySelectorAll("[data-tx-item]:not([hidden])").length;
      events += shown;
      if (shown) turns += 1;
    });
    status.textContent =
      (events
        ? events + " event" + (events === 1 ? "" : "s") + " in " + turns + " turn" + (turns === 1 ? "" : "s") + " match “" + needle + "”"
        : "No event matches “" + needle + "”") + (loading ? " (loading " + loading + " more…)" : "");
  }

  function searchScope(scope, value) {
    var box = scope.querySelector("[data-tx-search]");
    if (!box) return;
    box.value = value;
    search(box);
  }

  function searchCase(value) {
    document.querySelectorAll("details.tx-section").forEach(function (section) {
      if (value.trim() && !section.open) section.open = true; // loads it (hx-trigger: toggle once)
      var scope = section.querySelector("[data-tx-scope]");
      if (scope) searchScope(scope, value);
    });
    caseStatus();
  }

  document.addEventListener("htmx:afterSettle", function (evt) {
    var box = caseBox();
    var target = evt.detail && evt.detail.target;
    if (!box || !box.value.trim() || !target || !target.closest) return;
    var section = target.closest("details.tx-section");
    var scope = section && section.querySelector("[data-tx-scope]");
    if (scope) searchScope(scope, box.value);
    caseStatus();
  });

  document.addEventListener("input", function (evt) {
    if (!evt.target.matches) return;
    if (evt.target.matches("[data-tx-search]")) search(evt.target);
    else if (evt.target.matches("[data-tx-case-search]")) searchCase(evt.target.value);
  });
})();
