"""Reviewing a group: the N-way comparison page, interdiffs, patches and transcripts.

`comparison` lays a group's patches out as columns and rows, `columns` orders and pages
them, `matrix` renders the comparison's body; the escaping toolkit they build on
(patches, highlighting, transcripts, statements, the render store) is `webapp.html`.
"""
