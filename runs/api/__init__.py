"""The HTTP API (django-ninja) of the runs app: one router per area, explicit In/Out schemas.

Mounted under ``/api/v1`` by ``holodeck_web.api``; OpenAPI docs at ``/api/v1/docs``.
"""
