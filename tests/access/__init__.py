"""Access (access/, services/access/): tokens, profiles, rate limits, audit, HTTP edges."""
