"""The ``registry`` subcommands, one module per concern, each imported only when it runs."""
