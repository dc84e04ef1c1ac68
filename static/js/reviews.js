// The review panels (templates/runs/_review_panel.html): a review the server refuses answers
// 400 (the message at its field) or 403 (the role it takes) with the panel drawn again, which
// htmx would not swap in by itself (it swaps only 2xx answers). Loaded by each fragment that
// holds panels (a case's turns, the case page, the review queue): once per page.
(function () {
  "use strict";
  if (window.holodeckReviews) return;
  window.holodeckReviews = true;

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail && evt.detail.xhr;
    var source = evt.detail && evt.detail.requestConfig && evt.detail.requestConfig.elt;
    if (!xhr || !source || !source.closest) return;
    if (!source.closest("[data-review]")) return;
    if (xhr.status === 400 || xhr.status === 403) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  // After a swap, the panel's first refused field takes the focus (its message is read out).
  document.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    // An outerHTML swap replaced the target: the panel now in the page has its id.
    var panel = target && target.id ? document.getElementById(target.id) : null;
    if (!panel || !panel.matches("[data-review]")) return;
    var invalid = panel.querySelector("[aria-invalid=true]");
    if (invalid && invalid.focus) invalid.focus();
  });
})();
