"""`dsx completion SHELL`: print click's completion script for bash, zsh or fish.

The script calls `dsx` back with `_DSX_COMPLETE` set; click answers with the commands, options
and choices of the command line typed so far (docs/user-guide.md, "Shell completion").
"""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_DSX_COMPLETE"

INSTALL = {
    "bash": 'eval "$(dsx completion bash)"   # in ~/.bashrc (bash >= 4.4)',
    "zsh": 'eval "$(dsx completion zsh)"    # in ~/.zshrc, after compinit',
    "fish": "dsx completion fish > ~/.config/fish/completions/dsx.fish",
}


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print a shell completion script for SHELL (bash, zsh or fish).

    \b
    bash: eval "$(dsx completion bash)"   # in ~/.bashrc (bash >= 4.4)
    zsh:  eval "$(dsx completion zsh)"    # in ~/.zshrc, after compinit
    fish: dsx completion fish > ~/.config/fish/completions/dsx.fish
    """
    from click.shell_completion import get_completion_class

    from dsx.cli.main import cli

    cls = get_completion_class(shell)
    assert cls is not None  # every name in SHELLS is one click ships
    click.echo(cls(cli, {}, "dsx", COMPLETE_VAR).source())
