"""The one home of access: scopes, profiles, tokens, rate limits, audit, job limits, client entries."""
