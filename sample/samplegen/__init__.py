"""Builds the sample's rollouts from its data files; see sample/README.md."""
