"""Infrastructure every other services package may use: settings, the database and its
embedded server, errors, argument checks, health, memory, the parse budgets and linear-time markdown
line primitives. A leaf: nothing here imports another services package (tests/test_architecture.py)."""
