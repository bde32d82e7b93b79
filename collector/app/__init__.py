"""The process: configuration, serve wiring, health and metrics HTTP, the ``ktc`` CLI.
Nothing imports it."""
