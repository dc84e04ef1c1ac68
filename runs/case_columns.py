"""The columns a compare reads on each case row instead of its turns: written when its run ends
(``runs.selectors.compare_store``), so a compare of finished runs of 100,000 cases aligns and
tallies them from one index (``case_compare_key``, created by migration 0023) and reads turn
verdicts only for the rows it shows (``runs.compare.reads.tally``)."""

from __future__ import annotations

from django.db import models


class CompareColumns(models.Model):
    """Abstract: ``CaseRow``'s compare columns (NULL until its run ends)."""

    # The case's key in a compare: its name, else "#<index>"; a name repeated in the run gets
    # " (2)", " (3)" in index order (``runs.core.comparison.matrix.keys_by_index``); repetitions
    # share it.
    compare_key = models.CharField(max_length=600, null=True, blank=True)
    # Its turns' verdicts, one "index|outcome|verdicts by kind (JSON)" line per turn in index
    # order (``runs.selectors.compare_cases.TURN_LINE``); "" for a case without turns.
    verdicts = models.TextField(null=True, blank=True)
    # 16 hex digits of the MD5 of its status, outcome, verdicts by kind and ``verdicts``: cases
    # with equal digests are decided once.
    verdicts_digest = models.CharField(max_length=16, null=True, blank=True)

    class Meta:
        abstract = True
