"""What people conclude about results, Django-free: the human verdict and the triage vocabulary,
the roles per project, a turn's identity across runs and commits, and how a judge agrees with
people (``agreement``)."""
