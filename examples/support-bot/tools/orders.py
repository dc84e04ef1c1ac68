"""Function tools of the support-bot example: a tiny in-memory order book and store hours."""

from __future__ import annotations

ORDERS: dict[str, dict[str, str]] = {
    "A1001": {"status": "shipped", "eta": "2025-05-12", "carrier": "Parcelink"},
    "A1002": {"status": "processing", "eta": "2025-05-15", "carrier": "Parcelink"},
}


def order_status(order_id: str) -> dict[str, str]:
    """Look up an order.

    Args:
        order_id: the order number, e.g. "A1001".
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise LookupError(f"no order {order_id!r}")
    return {"order_id": order_id.strip().upper(), **order}


def store_hours() -> str:
    """The opening hours of the store and the support line."""
    return "Monday to Saturday, 9am to 6pm"
