// Confirm before a destructive submit: <form data-confirm="Cancel run #12?"> asks first and
// submits only when the user accepts. The page's Content Security Policy allows no inline
// handler (onsubmit="return confirm(...)"), so this one listener on the document does it for
// every such form, including forms htmx swaps in later.
//
// Without this script the forms submit without asking (the server side is unchanged).
(function () {
  "use strict";

  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      if (!(form instanceof HTMLFormElement)) return;
      var submitter = event.submitter;
      var message =
        (submitter && submitter.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
      if (!message) return;
      if (!window.confirm(message)) {
        // The capture phase runs first: stop here so no other handler (htmx) sends it either.
        event.preventDefault();
        event.stopImmediatePropagation();
      }
    },
    true
  );
})();
