"""`python -m dsx` runs the CLI."""

from dsx.cli.entry import main

if __name__ == "__main__":
    main()
