"""One module per `sagebox` subcommand; each exposes `register(subparsers)`."""
