"""Presentation of untrusted rollout content: markdown, highlighted diffs, transcripts.

Everything here turns agent or task text into HTML; every function escapes
what it is given and returns markup built only from our own tags.
"""
