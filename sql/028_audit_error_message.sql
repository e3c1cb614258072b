-- Issue 32.5: a failed call's error message in the audit log, redacted and cut to 500 characters
-- (services/access/audit.py), beside its error_code.
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS error_message text;
