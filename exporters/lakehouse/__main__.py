"""``python -m exporters.lakehouse``: the lakehouse commands without the collector's CLI."""

from exporters.lakehouse.cli.main import main

main(prog_name="python -m exporters.lakehouse")
