"""Jobs: the one home of background work that fills sources (crawls, folder syncs, git syncs).

sql.py holds every statement on the jobs table; queue.py (`JobQueue`) queues, reads, cancels and hands
out jobs of any kind; run.py (`JobRun`) is the lifecycle every kind shares; worker.py claims jobs and
runs each with the runner its kind names in the table services/app.py builds.
"""
