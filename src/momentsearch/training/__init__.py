"""Training: typed configs, batching, the trainer loop with checkpoints and validation."""
