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
  // A search marks every match (<mark class="tx-hit">) in the events' texts, tool names, args,
  // results and errors, and makes the first one current (outlined, scrolled into view). Enter /
  // Shift+Enter in its field, F3 / Shift+F3 anywhere on the page, or its Next / Previous
  // buttons move the current match; "Only matching events" hides the events without one. Two
  // searches work this way: a transcript's own ([data-tx-search], over its [data-tx-scope]) and
  // the case page's ([data-tx-case-search], over every turn's transcript: it opens and loads
  // them, and hides the turns without a match too). Its status says "match 2 of 7 (in 3 turns)".

  // Where a match counts: the events' texts, args, results, errors and tool names; not a model
  // call's full request (loaded on demand) nor a "parts" event: raw request messages, which the
  // run's search leaves out too.
  var SEARCHED = "[data-tx-copy-source], .tx-tool";
  var UNSEARCHED = "[data-tx-request], .tx-parts";
  var HIT = "mark.tx-hit";
  var CURRENT = "tx-hit-current";
  var BOXES = "[data-tx-search], [data-tx-case-search]";
  var lastBox = null; // the search F3 moves in: the one last typed in or stepped through

  function unmark(scope) {
    scope.querySelectorAll(HIT).forEach(function (hit) {
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

  function reveal(hit) {
    // A hit inside a collapsed system prompt or a long text behind "show all": open it.
    for (var box = hit.closest("details"); box; box = box.parentElement.closest("details")) {
      if (!box.closest("[data-tx-item]")) break;
      box.open = true;
    }
    var clamp = hit.closest(".tx-clamp");
    var more = clamp && clamp.querySelector(".tx-more");
    if (more) more.open = true;
  }

  // Mark the needle in a transcript's events; each event with a match gets data-tx-matched.
  function markScope(scope, needle) {
    unmark(scope);
    scope.setAttribute("data-tx-searched", "");
    scope.querySelectorAll("[data-tx-item]").forEach(function (item) {
      var hits = 0;
      if (needle) {
        item.querySelectorAll(SEARCHED).forEach(function (place) {
          if (place.closest(UNSEARCHED)) return;
          textNodes(place).forEach(function (node) {
            hits += markIn(node, needle);
          });
        });
      }
      item.toggleAttribute("data-tx-matched", hits > 0);
      if (hits) item.querySelectorAll(HIT).forEach(reveal);
    });
  }

  function isCase(box) {
    return box.matches("[data-tx-case-search]");
  }

  function needleOf(box) {
    return box.value.trim().toLowerCase();
  }

  function barOf(box) {
    return box.closest(".tx-toolbar");
  }

  function scopesOf(box) {
    if (isCase(box)) {
      return Array.prototype.slice.call(document.querySelectorAll("details.tx-section [data-tx-scope]"));
    }
    var scope = box.closest("[data-tx-scope]");
    return scope ? [scope] : [];
  }

  function hitsOf(box) {
    var hits = [];
    scopesOf(box).forEach(function (scope) {
      hits.push.apply(hits, scope.querySelectorAll(HIT));
    });
    return hits;
  }

  function currentIn(hits) {
    for (var i = 0; i < hits.length; i++) if (hits[i].classList.contains(CURRENT)) return i;
    return -1;
  }

  function makeCurrent(hit) {
    document.querySelectorAll("mark." + CURRENT).forEach(function (old) {
      old.classList.remove(CURRENT);
    });
    if (!hit) return;
    hit.classList.add(CURRENT);
    reveal(hit);
    hit.scrollIntoView({ block: "center", inline: "nearest" });
  }

  // "Only matching events": the events without a match hidden, and in the case's search the
  // turns whose transcript has none (a turn whose transcript is still loading stays).
  function hideUnmatched(box) {
    var only = barOf(box).querySelector("[data-tx-only]");
    var on = Boolean(only && only.checked && needleOf(box));
    scopesOf(box).forEach(function (scope) {
      scope.querySelectorAll("[data-tx-item]").forEach(function (item) {
        item.hidden = on && !item.hasAttribute("data-tx-matched");
      });
    });
    if (!isCase(box)) return;
    document.querySelectorAll("section.turn").forEach(function (turn) {
      var scope = turn.querySelector("details.tx-section [data-tx-scope]");
      var loading = turn.querySelector("details.tx-section") && !scope;
      turn.hidden = on && !loading && !(scope && scope.querySelector(HIT));
    });
  }

  function plural(count, word) {
    return count + " " + word + (count === 1 ? "" : "s");
  }

  function statusText(box, hits) {
    var shown = box.value.trim();
    if (!shown) return "";
    var loading = isCase(box)
      ? document.querySelectorAll("details.tx-section[open] .tx-body > p.muted").length
      : 0;
    var more = loading ? " (loading " + loading + " more…)" : "";
    if (!hits.length) return "No match for “" + shown + "”" + more;
    var places = isCase(box)
      ? plural(scopesOf(box).filter(function (scope) { return scope.querySelector(HIT); }).length, "turn")
      : plural(scopesOf(box)[0].querySelectorAll("[data-tx-matched]").length, "event");
    var at = currentIn(hits);
    var which = at < 0 ? hits.length + (hits.length === 1 ? " match" : " matches") : "match " + (at + 1) + " of " + hits.length;
    return which + " (in " + places + ")" + more;
  }

  // The status line and the buttons of a search: Next and Previous only with a match to go to.
  // A turn's search that the case's handed its text to keeps its status empty: one speaks.
  function say(box) {
    var bar = barOf(box);
    var hits = box.value.trim() ? hitsOf(box) : [];
    var status = bar.querySelector("[data-tx-search-status], [data-tx-case-status]");
    var quiet = box.hasAttribute("data-tx-handed");
    if (status) status.textContent = quiet ? "" : statusText(box, hits);
    bar.querySelectorAll("[data-tx-next], [data-tx-prev]").forEach(function (button) {
      button.disabled = hits.length === 0;
    });
  }

  function sayAll() {
    document.querySelectorAll(BOXES).forEach(function (box) {
      if (barOf(box)) say(box);
    });
  }

  // The case's search hands its text and its "only matching" to each turn's own search.
  function handDown(box, scope) {
    var own = scope.querySelector("[data-tx-search]");
    if (!own || !barOf(own)) return;
    own.value = box.value;
    own.toggleAttribute("data-tx-handed", Boolean(box.value.trim()));
    var only = barOf(box).querySelector("[data-tx-only]");
    var ownOnly = barOf(own).querySelector("[data-tx-only]");
    if (only && ownOnly) ownOnly.checked = only.checked;
  }

  function search(box) {
    var needle = needleOf(box);
    lastBox = box;
    box.removeAttribute("data-tx-moved");
    box.removeAttribute("data-tx-handed");
    if (isCase(box)) {
      document.querySelectorAll("details.tx-section").forEach(function (section) {
        if (needle && !section.open) section.open = true; // loads it (hx-trigger: toggle once)
      });
    }
    scopesOf(box).forEach(function (scope) {
      if (isCase(box)) handDown(box, scope);
      markScope(scope, needle);
    });
    hideUnmatched(box);
    makeCurrent(needle ? hitsOf(box)[0] : null);
    sayAll();
  }

  function step(box, direction) {
    var hits = hitsOf(box);
    if (!box.value.trim() || !hits.length) return;
    var at = currentIn(hits);
    var next = at < 0 ? (direction > 0 ? 0 : hits.length - 1) : (at + direction + hits.length) % hits.length;
    lastBox = box;
    box.setAttribute("data-tx-moved", "");
    makeCurrent(hits[next]);
    sayAll();
  }

  // The search F3 moves in: the one last used, else the case's, when it holds a text.
  function activeBox() {
    var boxes = [lastBox, document.querySelector("[data-tx-case-search]")];
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box && box.isConnected && box.value.trim() && hitsOf(box).length) return box;
    }
    return null;
  }

  // A transcript's own search gets its Next / Previous buttons and its "Only matching events"
  // here (the case's has them in its template): once, when its transcript is drawn.
  function button(label, where, name, keys, hint) {
    var made = document.createElement("button");
    made.type = "button";
    made.className = "tx-step";
    made.setAttribute(name, "");
    made.setAttribute("aria-label", label + " match" + where);
    made.setAttribute("aria-keyshortcuts", keys);
    made.title = hint;
    made.disabled = true;
    made.textContent = label;
    return made;
  }

  function addControls(box) {
    var bar = barOf(box);
    if (!bar || bar.querySelector("[data-tx-next]")) return;
    var hidden = bar.querySelector(".tx-search .sr-only");
    var where = hidden ? hidden.textContent.replace(/\s+/g, " ").trimEnd() : "";
    var steps = document.createElement("span");
    steps.className = "tx-steps";
    steps.appendChild(button("Previous", where, "data-tx-prev", "Shift+F3", "Shift+Enter in the search field, or Shift+F3"));
    steps.appendChild(button("Next", where, "data-tx-next", "F3", "Enter in the search field, or F3"));
    var only = document.createElement("label");
    only.className = "tx-only";
    var check = document.createElement("input");
    check.type = "checkbox";
    check.setAttribute("data-tx-only", "");
    only.appendChild(check);
    only.appendChild(document.createTextNode(" Only matching events"));
    var status = bar.querySelector("[data-tx-search-status]");
    bar.insertBefore(steps, status);
    bar.insertBefore(only, status);
  }

  function addAllControls(root) {
    root.querySelectorAll("[data-tx-search]").forEach(addControls);
  }
  addAllControls(document);

  document.addEventListener("input", function (evt) {
    if (evt.target.matches && evt.target.matches(BOXES)) search(evt.target);
  });

  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.altKey || evt.ctrlKey || evt.metaKey) return;
    var target = evt.target;
    if (evt.key === "Enter" && !evt.isComposing && target.matches && target.matches(BOXES)) {
      evt.preventDefault();
      step(target, evt.shiftKey ? -1 : 1);
    } else if (evt.key === "F3") {
      var box = activeBox();
      if (!box) return; // nothing searched here: the browser's own find
      evt.preventDefault();
      step(box, evt.shiftKey ? -1 : 1);
    }
  });

  document.addEventListener("click", function (evt) {
    var pressed = evt.target.closest && evt.target.closest("[data-tx-next], [data-tx-prev]");
    var box = pressed && barOf(pressed).querySelector(BOXES);
    if (box) step(box, pressed.hasAttribute("data-tx-prev") ? -1 : 1);
  });

  document.addEventListener("change", function (evt) {
    if (!evt.target.matches || !evt.target.matches("[data-tx-only]")) return;
    var box = barOf(evt.target).querySelector(BOXES);
    if (!box) return;
    if (isCase(box)) scopesOf(box).forEach(function (scope) { handDown(box, scope); });
    hideUnmatched(box);
    var current = document.querySelector("mark." + CURRENT);
    if (current && box.value.trim()) current.scrollIntoView({ block: "center", inline: "nearest" });
    sayAll();
  });

  // A transcript drawn (a turn's section opened): its search's controls, and the case's search
  // carried into it while the case's field holds a text.
  document.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (target && target.querySelectorAll) addAllControls(target);
  });

  document.addEventListener("htmx:afterSettle", function (evt) {
    var box = document.querySelector("[data-tx-case-search]");
    var target = evt.detail && evt.detail.target;
    if (!box || !box.value.trim() || !target || !target.classList) return;
    if (!target.classList.contains("tx-body")) return; // a transcript, not a request inside one
    var section = target.closest("details.tx-section");
    var scope = section && section.querySelector("[data-tx-scope]");
    if (!scope) return;
    handDown(box, scope);
    markScope(scope, needleOf(box));
    hideUnmatched(box);
    var first = hitsOf(box)[0];
    // Until the reader moves, the current match is the case's first, whichever turn came first.
    if (!box.hasAttribute("data-tx-moved") && first && !first.classList.contains(CURRENT)) makeCurrent(first);
    sayAll();
  });

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
})();
