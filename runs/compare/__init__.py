"""Compare: runs side by side, and the CI gate that compares two sets of runs.

Its rules are Django-free, in ``runs/core/comparison/`` (the query, the matrix, the pairs, the
row filters, the CSV); the columns a case row stores for it when its run ends are counted by
``runs.selectors.compare_store`` and read by ``runs.selectors.compare_cases`` (shared with
trends and the recorder, below this folder). Here, on top of everything else:

- ``reads/``: the comparison of runs (``comparison.py``: ``comparison_for``, ``compare_runs``),
  the rows a page, the API and the CSV read (``compared_rows.py``), finished runs tallied in the
  database (``tally.py``), the baseline (``baseline.py``), the CSV's rows (``export.py``);
- ``pages/``: the views (``views.py``: the compare page, a case, the agent.yaml diff), their
  query parameters (``params.py``), the page's view models (``view_models.py``: the headline's
  lines and the matrix's rows, which ``matrix_html.py`` draws), a case side by side
  (``case.py``), the agent.yaml and files diffed (``files.py``), two transcripts side by side
  (``transcript_pair.py`` with ``transcripts.py``), the CSV page (``download.py``); ``urls.py``
  mounts them under /compare/;
- ``csv_download.py``: the compare as a CSV response, for the page and the API;
- ``api.py``: ``GET /api/v1/compare`` and its friends; ``gate.py`` and ``gate_api.py``: the CI
  gate (``manage.py gate``, ``POST /api/v1/gate``).
"""
