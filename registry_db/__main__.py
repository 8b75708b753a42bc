"""``python -m registry_db``: the same command line as ``registry``."""

from registry_db.cli.group import main

if __name__ == "__main__":  # pragma: no branch
    main(prog_name="registry")
