"""HoloDeck-compatible result models, report building, file import/export and writers.

Django-free: the engine, the CLI and the web app all use it.
"""
