"""``python -m collector.app.cli``: the ``ktc`` command."""

from collector.app.cli import main

main()
