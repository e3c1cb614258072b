"""Code, navigated (issue 36): the symbol table of synced code (`symbols*.py`: definitions and
references from the syntax tree, names documented by API reference pages) and what reads it."""
