"""Runs side by side (Django-free): the compare matrix from plain values, commit order."""
