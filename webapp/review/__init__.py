"""Reviewing a group: the N-way comparison page, interdiffs, patches and transcripts.

`diffview`, `highlight`, `groupview`, `matrix`, `markdown`, `text` and
`transcripts` turn untrusted rollout content into HTML; every function there
escapes what it is given and returns markup built only from our own tags.
`renders` keeps rendered patches in the database for every web process.
"""
