"""Writes, one module per stage of a run's life (HackSoft names, keyword-only arguments):

- ``projects``: register agent projects;
- ``launch``: validate an agent, pin its content snapshot, create a queued run, cancel a run;
- ``execution``: start a run and execute its cases in a worker (through ``runs.recorder``);
- ``run_agents``: the agent of a run, loaded once per process per snapshot (for ``execution``);
- ``recovery``: take back cases whose worker died and messages that were lost (the workers'
  sweeper and ``manage.py recover``; never a view);
- ``queue``: put a task on the broker by name, after the transaction commits;
- ``gate``: the CI gate (find a run and its baseline, compare them, check the thresholds).

Services never import ``runs.tasks``: they enqueue through ``queue`` by task name, so the tasks
(which call services) and the services form no import circle.
"""
