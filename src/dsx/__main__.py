"""`python -m dsx` runs the CLI."""

from dsx.cli.main import main

if __name__ == "__main__":
    main()
