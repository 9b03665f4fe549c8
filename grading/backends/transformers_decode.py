"""The transformers backend's decode loop over a static KV cache, schema-constrained by xgrammar.

One batched forward per new token. What the attention needs is computed on the host from
the step number (the cache slots in use, each row's left padding), so a forward reads
nothing back from the device and one graph covers every layer and step (torch.compile,
CUDA graphs). The grammar matchers run on the host: the step's one read from the device
is the batch's sampled tokens, which they accept; they fill the next token bitmask for
all rows at once (xgrammar's thread pool), while the device runs the forward, and the
mask is applied to the logits on their device. Tokens are picked as transformers'
`generate` picks them (its processors, in its order, one `torch.multinomial` per step),
so a seed gives the tokens it gave. torch, transformers and xgrammar are imported when
a function is called.
"""

from __future__ import annotations

ATTENTION = "gagar_sdpa"


def decode(model, cache, last_tokens, lengths: list[int], width: int, grammars: list, sampling,
           stop_ids: list[int], filler) -> list[list[int]]:
    """Up to `sampling.max_new_tokens` new tokens per row; a row that stops ends with its stop token.

    `cache` is a static cache holding every prompt but its last token, left-padded to the
    same `width - 1` slots; `last_tokens` (batch,) are the prompts' last tokens, `lengths`
    their lengths, `grammars` one compiled grammar per row, `filler` an
    `xgrammar.BatchGrammarMatcher`. Rows stay in the batch once stopped, as in
    `generate` (the sampler draws for every row).
    """
    import torch

    device = last_tokens.device
    prompt_lengths = torch.tensor(lengths, device=device)
    slots = torch.arange(width + sampling.max_new_tokens, device=device)
    # (batch, 1, 1, slots): a row attends to its own tokens, after its left padding.
    padding = (slots >= width - prompt_lengths[:, None])[:, None, None, :]
    masks = _GrammarMasks(grammars, model.config.vocab_size, filler, device)
    pick = _picker(sampling)
    tokens, rows, active = last_tokens, [[] for _ in lengths], list(range(len(lengths)))
    for step in range(sampling.max_new_tokens):
        logits = decode_step(model, cache, tokens, prompt_lengths - 1 + step,
                             padding[..., :width + step])
        masks.fill(active)
        tokens = pick(masks.apply(logits))
        sampled = tokens.tolist()  # the step's one read from the device, for the matchers
        masks.accept(active, [sampled[i] for i in active])
        for i in active:
            rows[i].append(sampled[i])
        active = [i for i in active if sampled[i] not in stop_ids]
        if not active:
            break
    return rows


def decode_step(model, cache, tokens, positions, padding):
    """Float32 logits (batch, vocab) of the token after `tokens` (batch,) at `positions`
    (batch,), whose keys and values go to the cache's next slot; `padding` (batch, 1, 1,
    slots in use) is True where a row may attend."""
    output = model(input_ids=tokens[:, None], position_ids=positions[:, None],
                   attention_mask=padding, cache=cache, use_cache=True)
    return output.logits[:, -1].float()


class _GrammarMasks:
    """Each row's grammar matcher, and the token bitmask they fill together on the host."""

    def __init__(self, grammars: list, vocab_size: int, filler, device):
        import xgrammar

        self.matchers = [xgrammar.GrammarMatcher(grammar) for grammar in grammars]
        self.bitmask = xgrammar.allocate_token_bitmask(len(grammars), vocab_size)
        if device.type == "cuda":
            # Pinned, so the copy to the device is asynchronous; the next fill comes after
            # the step's read of the sampled tokens, so after this copy has run.
            self.bitmask = self.bitmask.pin_memory()
        self.filler = filler

    def fill(self, rows: list[int]) -> None:
        """The next token's mask for `rows`; a stopped row keeps its last one, as in
        xgrammar's logits processor for `generate` (its token is never used)."""
        self.filler.batch_fill_next_token_bitmask([self.matchers[i] for i in rows],
                                                  self.bitmask, rows)

    def apply(self, logits):
        import xgrammar

        xgrammar.apply_token_bitmask_inplace(
            logits, self.bitmask.to(logits.device, non_blocking=True))
        return logits

    def accept(self, rows: list[int], tokens: list[int]) -> None:
        import xgrammar

        accepted = xgrammar.BatchGrammarMatcher.batch_accept_token(
            [self.matchers[i] for i in rows], tokens)
        rejected = [(row, token) for row, token, ok in zip(rows, tokens, accepted, strict=True)
                    if not ok]
        if rejected:
            raise RuntimeError(f"the grammar rejected the sampled (row, token) {rejected}")


def _picker(sampling):
    """The next token from masked logits (batch, vocab): greedy, or `generate`'s sampling."""
    import torch
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    if sampling.temperature == 0:
        return lambda scores: scores.argmax(dim=-1)
    warpers = []
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(sampling.top_p))

    def sample(scores):
        for warp in warpers:
            scores = warp(None, scores)
        return torch.multinomial(scores.softmax(dim=-1), num_samples=1).squeeze(1)

    return sample


def register_attention() -> str:
    """Register transformers' SDPA for prefill and a decode attention for `decode_step`
    as ATTENTION, and return that name.

    A static cache holds the prompts and room for every token still to come. In a decode
    step the padding mask's width is the number of slots in use, so keys and values are
    cut there: the empty slots are never read. That width is a shape, the same in every
    layer, so nothing is read back from the device and no layer needs its own graph. The
    query heads that share a key/value head become that head's queries (grouped-query
    attention without repeating the cache), as transformers' SDPA does in eager decoding.
    """
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
        if query.shape[2] > 1 or attention_mask is None:
            return sdpa_attention_forward(module, query, key, value, attention_mask,
                                          scaling=scaling, **kwargs)
        batch, heads, _, dim = query.shape
        used = attention_mask.shape[-1]
        grouped = query.reshape(batch, key.shape[1], heads // key.shape[1], dim)
        output = torch.nn.functional.scaled_dot_product_attention(
            grouped, key[:, :, :used], value[:, :, :used], attn_mask=attention_mask,
            scale=scaling)
        return output.reshape(batch, heads, 1, -1).transpose(1, 2).contiguous(), None

    AttentionInterface.register(ATTENTION, attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION
