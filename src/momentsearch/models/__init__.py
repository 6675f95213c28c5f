"""Models. Each is one file that reads like its paper; see ``xml`` (Lei et al., 2020)."""
