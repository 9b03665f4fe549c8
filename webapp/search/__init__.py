"""Search inside a batch: task statements, patches and transcript turns."""
