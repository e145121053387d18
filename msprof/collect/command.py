"""Placeholder for the collect command (issue 3)."""
import click


@click.command("collect")
def collect():
    """Push the app to the board over SSH, run it with profiling on, pull the JOB directories back."""
    raise click.UsageError("collect is not implemented yet")
