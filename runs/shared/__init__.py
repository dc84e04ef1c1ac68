"""What the views (runs/web, runs/compare/pages), the API routers and the template tags share,
below all three so none imports another: access (a refusal's words, a user's role), downloads
(a run's export, a snapshot's zip), uploads (an import's files), the marks and formats drawn in
Python and in templates (``marks``), and a transcript's events as drawn
(``transcript_events``)."""
