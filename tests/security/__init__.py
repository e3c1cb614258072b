"""Attack tests (issue 23): hostile input through the real components."""
