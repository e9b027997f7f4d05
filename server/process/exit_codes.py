"""`hearth`'s exit codes, as scripts and the launcher read them."""

EXIT_USAGE = 2  # a bad option, file or address: fix the command line
EXIT_MODEL_FAILED = 1  # the model (or the embeddings model) did not load
