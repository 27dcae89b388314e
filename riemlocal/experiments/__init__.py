"""Paper reproductions runnable offline (``riemlocal <name>`` on the command line)."""
