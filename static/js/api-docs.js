/* The API docs page (/api/v1/docs): Swagger UI from the package's own static files, started
   here rather than by an inline script (the page's CSP is script-src 'self'). The schema's URL
   and the CSRF token come from data attributes of #swagger-ui. */
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof SwaggerUIBundle === "undefined") return;
  var csrfToken = root.dataset.csrfToken;
  SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    // No deep links: Swagger UI draws each as a link inside the operation's toggle button (a
    // control inside a control, which screen readers cannot reach).
    deepLinking: false,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    // No badge from the public validator: the page asks no other host for anything.
    validatorUrl: null,
    requestInterceptor: function (request) {
      if (csrfToken) request.headers["X-CSRFToken"] = csrfToken;
      return request;
    },
  });
})();
