"""Import HoloDeck result files (upload) into a project."""

from ninja import Router

router = Router(tags=["import"])
