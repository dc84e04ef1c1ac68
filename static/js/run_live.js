// Live updates of the run page: open case rows stay open when the poll swaps them in again;
// when the progress poll fails, say so and back off.
//
// htmx keeps firing the "every 1s" trigger of #run-progress after a failed request (nothing was
// swapped), so failures would otherwise be silent and hammer a broken server. Each failure shows
// a banner and skips the next polls for a growing delay; after MAX_FAILURES the page stops
// polling and asks for a reload. A successful poll hides the banner and resets the count.
(function () {
  "use strict";
  var MAX_FAILURES = 5;
  var BASE_DELAY_MS = 2000;
  var failures = 0;
  var retryAt = 0;
  var stopped = false;

  function isPoll(evt) {
    var elt = evt.detail && evt.detail.elt;
    return Boolean(elt && elt.id === "run-progress");
  }

  function banner(text) {
    var box = document.getElementById("poll-banner");
    if (!box) return;
    if (text) {
      box.textContent = text;
      box.hidden = false;
    } else {
      box.hidden = true;
      box.textContent = "";
    }
  }

  function failed(evt, cause) {
    if (!isPoll(evt)) return;
    failures += 1;
    var delay = BASE_DELAY_MS * Math.pow(2, failures - 1);
    retryAt = Date.now() + delay;
    stopped = failures >= MAX_FAILURES;
    var head = "Live updates stopped (" + cause + ")";
    if (stopped) {
      banner(head + " — reload the page");
    } else {
      var seconds = Math.round(delay / 1000);
      banner(head + " — retrying in " + seconds + " s (attempt " + failures + " of " +
        MAX_FAILURES + "); reload the page if it persists");
    }
  }

  // The poll swaps in again the rows of cases that started or finished (and the whole list
  // once the run ends, or after a cancel): a row the reader had open stays open. Its turns are
  // kept as they are (hx-preserve) and, while the case runs, poll themselves for the turns
  // written since. A repeated run's row keeps saying which repetition it shows (its
  // .rep-shown, which the repetition switcher set).
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    var fragment = evt.detail && evt.detail.fragment;
    if (!target || !fragment || !fragment.querySelectorAll) return;
    var open = Array.prototype.slice.call(target.querySelectorAll("details.case[open][id]"));
    if (target.matches && target.matches("details.case[open][id]")) open.push(target);
    open.forEach(function (row) {
      var twin = fragment.querySelector("#" + CSS.escape(row.id));
      if (!twin) return;
      twin.setAttribute("open", "");
      var shown = row.querySelector(":scope > summary > .rep-shown");
      var slot = twin.querySelector(":scope > summary > .rep-shown");
      if (shown && slot) slot.replaceWith(shown.cloneNode(true));
    });
  });

  document.addEventListener("htmx:responseError", function (evt) {
    var xhr = evt.detail && evt.detail.xhr;
    failed(evt, "HTTP " + (xhr ? xhr.status : "error"));
  });
  document.addEventListener("htmx:sendError", function (evt) {
    failed(evt, "network error");
  });
  document.addEventListener("htmx:timeout", function (evt) {
    failed(evt, "timeout");
  });
  document.addEventListener("htmx:beforeRequest", function (evt) {
    if (!isPoll(evt)) return;
    if (stopped || Date.now() < retryAt) evt.preventDefault();
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    if (!isPoll(evt) || !evt.detail.successful) return;
    failures = 0;
    retryAt = 0;
    banner("");
  });
})();

// The run page on the keyboard: a second skip link, "Skip to the cases" (after base.html's
// "Skip to content"), which focuses the first case's row; and the keys j and k, which move the
// focus to the next and the previous failed or errored case row (its summary: Enter opens it)
// and scroll it into view. Not while typing (a text field, a select), nor with a modifier key.
// A hint above the case list says the keys.
(function () {
  "use strict";
  var FAILED = "details.case.case-failed > summary, details.case.case-error > summary";

  function focusRow(row) {
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "center" });
  }

  function addSkipLink() {
    var first = document.querySelector(".skip-link");
    var list = document.getElementById("case-list");
    if (!first || !list) return;
    var link = document.createElement("a");
    link.className = "skip-link";
    link.href = "#case-list";
    link.textContent = "Skip to the cases";
    link.addEventListener("click", function (evt) {
      var row = document.querySelector("#case-rows summary");
      if (!row) return; // no case row yet: the link's own jump to the list
      evt.preventDefault();
      focusRow(row);
    });
    first.after(link);
  }

  function addHint() {
    var list = document.getElementById("case-list");
    if (!list) return;
    var hint = document.createElement("p");
    hint.className = "key-hint small muted";
    hint.innerHTML = "Keys: <kbd>j</kbd> next failed case · <kbd>k</kbd> previous failed case";
    list.before(hint);
  }

  function typing(target) {
    return Boolean(target && (target.isContentEditable ||
      (target.closest && target.closest("input, textarea, select"))));
  }

  // The failed row after (or before) the focused element, in the page's order.
  function neighbour(rows, here, forward) {
    var inPage = here && here !== document.body && document.contains(here);
    if (!inPage) return forward ? rows[0] : rows[rows.length - 1];
    var found = null;
    rows.forEach(function (row) {
      if (row === here) return;
      var position = here.compareDocumentPosition(row);
      if (forward && !found && position & Node.DOCUMENT_POSITION_FOLLOWING) found = row;
      if (!forward && position & Node.DOCUMENT_POSITION_PRECEDING) found = row;
    });
    return found;
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "j" && evt.key !== "k") return;
    if (evt.defaultPrevented || evt.altKey || evt.ctrlKey || evt.metaKey || typing(evt.target)) {
      return;
    }
    var rows = Array.prototype.slice.call(document.querySelectorAll(FAILED));
    var row = rows.length && neighbour(rows, document.activeElement, evt.key === "j");
    if (!row) return;
    evt.preventDefault();
    focusRow(row);
  });

  addSkipLink();
  addHint();
})();
