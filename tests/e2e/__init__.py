"""End to end: the server in a subprocess, the installed wheel, the registry entry."""
