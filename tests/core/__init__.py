"""services/core/: settings, the database (and a read replica), bounded memory."""
