"""Code, navigated (issue 36): the line index of synced code and text files (`lines.py`), grep over it
(`grep.py`, with the trigram prefilter of `prefilter.py` and path globs of `paths.py`), reading a source's
files by path and line (`files.py`), and the symbol table (`symbols*.py`: definitions and references from
the syntax tree, names documented by API reference pages) and what reads it."""
