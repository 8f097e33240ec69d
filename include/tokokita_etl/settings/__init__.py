"""The settings: the model and its value rules, where values come from, how they are shown, and
the file layout they name. `sources.load_settings` is how the command line, the tasks and the
DAG file read them."""
