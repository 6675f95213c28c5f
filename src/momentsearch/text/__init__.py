"""Text encoders (offline MiniLM) and their caches."""
