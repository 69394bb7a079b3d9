"""The click command tree of refstore's typer app, for ``sphinx-click`` (reference/cli.md)."""

from __future__ import annotations

import typer

from refstore.cli.app import app

command = typer.main.get_command(app)
