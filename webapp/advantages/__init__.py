"""Advantages of a batch, on the shared floor: GRPO, then GAGAR redistribution over final rankings.

One row per trajectory, in a stable order (group, then trajectory id), so the same inputs
and config always give the same table. A group's ranking is its final ranking
(`webapp.rankings`); a group without one keeps its GRPO advantages (source "none"), and so
does a group whose ranking cannot apply (source "fallback", with the reason).

- `config`: a batch's redistribution config (`AdvantageConfig`, the one declaration of its
  fields) and its one parser; it imports no models, so the models take their default from it;
- `chunks`: the advantages of whole groups as columns (`AdvantageChunk`), computed from
  their trajectories, rankings and config, with no database;
- `selectors`: the trajectories and rankings read from the database (COPY and CSV on
  PostgreSQL) a chunk of whole groups at a time (`advantage_chunks`), or a window of small
  batches at a time (`advantage_chunks_of_batches`);
- `services`: a batch's config kept, and what it makes stale sent.
"""
