"""Git sources: a source bound to a ref of a remote repository, kept in sync by `git` jobs.

service.py binds repositories and queues syncs; config.py checks arguments and builds document
URLs; remote.py fetches (dulwich); tree.py decides which files belong and what a sync must do;
runner.py runs a git sync job (one sync per source at a time, as services/sync/runner.py).
"""

from services.sync.git.config import GitConfig
from services.sync.git.service import GitService

__all__ = ["GitConfig", "GitService"]
