"""Search: rankers that turn queries into ranked moments. Baselines live in ``baselines``."""
