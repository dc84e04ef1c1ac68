// Copy buttons: <button data-copy="#some-input" hidden> copies that input's value to the
// clipboard and says so in the nearest [data-copy-status]. The button is shown only when this
// script runs and the Clipboard API is available; the input stays selectable by hand either way
// ([data-select-on-focus] selects its whole value on focus). No inline handlers (CSP).
(function () {
  "use strict";

  function status(button, text) {
    var box = button.parentElement && button.parentElement.querySelector("[data-copy-status]");
    if (box) box.textContent = text;
  }

  function copy(button) {
    var target = document.querySelector(button.getAttribute("data-copy"));
    if (!target) return;
    target.focus();
    target.select();
    navigator.clipboard.writeText(target.value).then(
      function () {
        status(button, "Copied.");
      },
      function () {
        status(button, "Copy failed: select the token and copy it by hand.");
      }
    );
  }

  document.querySelectorAll("[data-copy]").forEach(function (button) {
    if (!navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      copy(button);
    });
  });

  document.querySelectorAll("[data-select-on-focus]").forEach(function (input) {
    input.addEventListener("focus", function () {
      input.select();
    });
  });
})();
