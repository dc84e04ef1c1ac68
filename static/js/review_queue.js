// The review queue on the keyboard (templates/runs/review_queue.html): one failure is the
// current one (focused, outlined); j / k move to the next / previous; a category's key (its
// button's data-key) triages the current failure into it, with the verdict 1–4 chose (agrees
// by default) and the note n opened (Esc leaves the note, keeping it); y confirms the review it
// carries from an earlier run; t opens its transcript, o its turn on the case page. After a
// triage the next failure not yet triaged becomes current. No key acts while a field has the
// focus (but Esc), nor with Ctrl, Alt or Meta.
(function () {
  "use strict";
  var ITEM = "[data-queue-item]";

  function items() {
    return Array.prototype.slice.call(document.querySelectorAll(ITEM));
  }

  function current() {
    return document.querySelector(ITEM + ".current") || null;
  }

  function select(item) {
    if (!item) return;
    items().forEach(function (other) {
      other.classList.toggle("current", other === item);
      if (other !== item) other.removeAttribute("aria-current");
    });
    item.setAttribute("aria-current", "true");
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function step(by) {
    var all = items();
    if (!all.length) return;
    var at = all.indexOf(current());
    var next = at < 0 ? 0 : Math.min(all.length - 1, Math.max(0, at + by));
    select(all[next]);
  }

  function nextOpen(from) {
    var all = items();
    var at = all.indexOf(from);
    for (var i = at + 1; i < all.length; i++) {
      if (!all[i].classList.contains("queue-done")) return all[i];
    }
    for (var j = 0; j < at; j++) {
      if (!all[j].classList.contains("queue-done")) return all[j];
    }
    return from;
  }

  function typing(el) {
    if (!el || !el.tagName) return false;
    var tag = el.tagName.toLowerCase();
    return tag === "textarea" || tag === "select" || el.isContentEditable ||
      (tag === "input" && !/^(checkbox|radio|button|submit)$/i.test(el.type));
  }

  function click(item, selector) {
    var target = item && item.querySelector(selector);
    if (target) target.click();
    return Boolean(target);
  }

  function act(item, key) {
    if (key === "n") {
      var note = item.querySelector("[data-queue-note]");
      if (note) note.focus();
      return Boolean(note);
    }
    if (key === "y") return click(item, "[data-queue-confirm]");
    if (key === "t") {
      var transcript = item.querySelector("details.queue-transcript");
      if (transcript) transcript.open = !transcript.open;
      return Boolean(transcript);
    }
    if (key === "o") {
      var link = item.querySelector(".queue-title a");
      if (link) window.location.href = link.href;
      return Boolean(link);
    }
    if (/^[1-4]$/.test(key)) return click(item, "[data-verdict-key='" + key + "']");
    return click(item, "button[data-key='" + CSS.escape(key) + "']");
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.altKey || evt.metaKey) return;
    var field = document.activeElement;
    if (typing(field)) {
      if (evt.key === "Escape") {
        var owner = field.closest(ITEM);
        if (owner) {
          evt.preventDefault();
          select(owner);
        }
      }
      return;
    }
    if (evt.key === "j" || evt.key === "k") {
      evt.preventDefault();
      step(evt.key === "j" ? 1 : -1);
      return;
    }
    if (evt.key.length !== 1) return;
    var item = current();
    if (!item) {
      var first = items()[0];
      if (!first) return;
      select(first);
      item = first;
    }
    if (act(item, evt.key)) evt.preventDefault();
  });

  // A click or a Tab into a failure makes it the current one.
  document.addEventListener("focusin", function (evt) {
    var item = evt.target && evt.target.closest ? evt.target.closest(ITEM) : null;
    if (item && !item.classList.contains("current")) {
      items().forEach(function (other) {
        other.classList.toggle("current", other === item);
      });
    }
  });

  // A triaged failure is drawn again in place: the next one not triaged becomes current.
  document.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    var id = target && target.id;
    var item = id ? document.getElementById(id) : null;
    if (!item || !item.matches(ITEM)) return;
    var xhr = evt.detail.xhr;
    if (xhr && xhr.status === 200 && item.classList.contains("queue-done")) {
      select(nextOpen(item));
    } else {
      select(item);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var first = items().filter(function (item) {
      return !item.classList.contains("queue-done");
    })[0];
    if (first && !window.location.hash) {
      first.classList.add("current");
      first.setAttribute("aria-current", "true");
    }
  });
})();
