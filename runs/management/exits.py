"""The exit codes of the commands that run, re-grade or gate an agent (``run_agent``,
``regrade``, ``gate``): what a CI job reads, the same number meaning the same thing in each."""

EXIT_PASSED = 0  # every case passed (the gate: within its thresholds)
EXIT_FAILED = 1  # a case failed, errored or could not be graded (the gate: a regression)
EXIT_BAD_INPUT = 2  # a configuration error, an unknown run, a bad option
EXIT_EXECUTION = 3  # the agent's run could not execute
