"""The verdict rules (Django-free): the outcome vocabulary and how each looks, the kinds of
grading, the one summary of a run or a case, a run's status line, repetitions and re-grades.
"""
