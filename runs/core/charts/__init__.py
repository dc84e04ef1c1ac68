"""Charts drawn as SVG from plain values (Django-free): the trends chart."""
