/* The API docs page (/api/v1/docs): Swagger UI from the package's own static files, started
   here rather than by an inline script (the page's CSP is script-src 'self'). The schema's URL
   and the CSRF token come from data attributes of #swagger-ui. */
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof SwaggerUIBundle === "undefined") return;
  var csrfToken = root.dataset.csrfToken;
  // Swagger UI heads its operations' groups with h3 right after the page's h1: a heading for
  // the operations themselves (read by screen readers, not shown) keeps the levels in order.
  function OperationsHeading(system) {
    var h = system.React.createElement;
    return {
      wrapComponents: {
        operations: function (Original) {
          return function (props) {
            return h("div", null,
              h("h2", {className: "visually-hidden"}, "Operations"),
              h(Original, props));
          };
        },
      },
    };
  }
  SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    // No deep links: Swagger UI draws each as a link inside the operation's toggle button (a
    // control inside a control, which screen readers cannot reach).
    deepLinking: false,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    plugins: [OperationsHeading],
    // No badge from the public validator: the page asks no other host for anything.
    validatorUrl: null,
    requestInterceptor: function (request) {
      if (csrfToken) request.headers["X-CSRFToken"] = csrfToken;
      return request;
    },
  });
})();
