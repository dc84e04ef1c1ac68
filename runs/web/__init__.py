"""The dashboard's web layer: plain function views, one template per screen, htmx fragments.

A module per screen: ``home``, ``launch``, ``run_list``, ``run_page`` (with ``case_list``, its
case list), ``cases``, ``projects``, ``trends``, ``compare``, ...; ``views`` holds what they
share (staff only, page sizes, a form's page, a new run's redirect, the 400 page). Views read
through ``runs.selectors`` and write through ``runs.services``; they import no model
(import-linter checks it). ``params`` validates query parameters (a bad one is a 400),
``exports`` builds the export download the page and the API share, ``uploads`` reads uploaded
result files for the import page and the API.
"""
