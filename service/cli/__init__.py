"""The `terminus` command line: one module per job, the demo and its recorded transcripts."""
