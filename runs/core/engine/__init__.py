"""The Django-free engine: agent.yaml in, HoloDeck-compatible results out."""
