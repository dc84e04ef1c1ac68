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

  // Keys pressed while a failure's post is on its way wait for its answer (the item it
  // replaces, and which failure is current then), and act in order after it.
  var awaiting = null;
  var buffered = [];

  function wait(id) {  // the list says whether a post is on its way (data-busy)
    awaiting = id;
    var list = document.querySelector("[data-queue-list]");
    if (!list) return;
    if (id) list.setAttribute("data-busy", "1");
    else list.removeAttribute("data-busy");
  }

  function handle(key) {
    if (key === "j" || key === "k") {
      step(key === "j" ? 1 : -1);
      return true;
    }
    var item = current();
    if (!item) {
      item = items()[0];
      if (!item) return false;
      select(item);
    }
    return act(item, key);
  }

  function wanted(key) {
    return key === "j" || key === "k" || key.length === 1;
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
    if (!wanted(evt.key)) return;
    if (awaiting) {
      evt.preventDefault();
      buffered.push(evt.key);
      return;
    }
    if (handle(evt.key)) evt.preventDefault();
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

  // A triaged failure is drawn again in place (its item's outerHTML): once the new item is in
  // the page (htmx:load; the old one, and the form that posted, are gone by then), the next
  // failure not triaged becomes current — or the same one, when the post was refused.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var source = evt.detail && evt.detail.elt;
    var item = source && source.closest ? source.closest(ITEM) : null;
    if (item && !source.matches("details")) wait(item.id);  // not a transcript's fetch
  });
  document.addEventListener("htmx:load", function (evt) {
    var item = evt.target;
    if (!awaiting || !item || item.id !== awaiting || !item.matches(ITEM)) return;
    wait(null);
    select(item.classList.contains("queue-done") ? nextOpen(item) : item);
    var keys = buffered;
    buffered = [];
    for (var i = 0; i < keys.length; i++) {
      if (awaiting) {  // a buffered key posted again: the rest wait for that answer
        buffered = buffered.concat(keys.slice(i));
        return;
      }
      handle(keys[i]);
      var field = document.activeElement;
      if (typing(field) && "value" in field) {  // n opened the note: the rest was its text
        field.value += keys.slice(i + 1).join("");
        return;
      }
    }
  });
  // A post that got no answer to swap in (the network, a server error): the keys it held are
  // dropped, and the keyboard works again.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var source = evt.detail && evt.detail.elt;
    var item = source && source.closest ? source.closest(ITEM) : null;
    if (!item || item.id !== awaiting || evt.detail.successful) return;
    var status = evt.detail.xhr ? evt.detail.xhr.status : 0;
    if (status !== 400 && status !== 403) {  // those are swapped in (static/js/reviews.js)
      wait(null);
      buffered = [];
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var list = document.querySelector("[data-queue-list]");
    if (list) list.setAttribute("data-keyboard", "1");
    var first = items().filter(function (item) {
      return !item.classList.contains("queue-done");
    })[0];
    if (first && !window.location.hash) {
      first.classList.add("current");
      first.setAttribute("aria-current", "true");
    }
  });
})();
