"""The ``momentsearch`` command line."""
