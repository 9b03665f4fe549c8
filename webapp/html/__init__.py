"""The HTML toolkit, on the shared floor: untrusted text (patches, transcripts, statements,
search snippets) as escaped HTML, and the store of rendered patches. Every feature that
shows such text uses it; it imports no feature."""
