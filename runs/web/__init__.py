"""The dashboard's web layer: plain function views, one template per screen, htmx fragments.

Views read through ``runs.selectors`` and write through ``runs.services``; they import no model
(import-linter checks it). ``params`` validates query parameters (a bad one is a 400),
``exports`` builds the export download the page and the API share, ``uploads`` reads uploaded
result files for the import page and the API.
"""
