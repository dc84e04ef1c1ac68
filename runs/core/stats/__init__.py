"""Statistics of runs side by side (Django-free): significance of a change in pass rate or score."""
