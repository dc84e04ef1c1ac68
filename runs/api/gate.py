"""The CI gate: compare a run with its baseline and say whether it may merge."""

from ninja import Router

router = Router(tags=["gate"])
