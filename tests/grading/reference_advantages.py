"""Plain-loop reference for grading.advantages: dicts of groups, Python loops, math.

Written for obviousness, not speed; the vectorised module is checked against it.
Inputs are sequences (lists or arrays); outputs are lists, one entry per trajectory,
and per-group reasons / labels as dicts {group: name}.
"""

import math
from collections import defaultdict


def _members(group_index):
    groups = defaultdict(list)
    for i, gid in enumerate(group_index):
        groups[int(gid)].append(i)
    return groups


def group_labels(passed, group_index):
    labels = {}
    for gid, members in _members(group_index).items():
        n_pass = sum(1 for i in members if passed[i])
        if len(members) == 1:
            labels[gid] = "singleton"
        elif n_pass == len(members):
            labels[gid] = "all_pass"
        elif n_pass == 0:
            labels[gid] = "all_fail"
        else:
            labels[gid] = "mixed"
    return labels


def grpo(rewards, group_index, *, norm_by_std=True, unbiased_std=True, eps=1e-6,
         verl_singletons=False):
    rewards = [float(r) for r in rewards]
    out = [0.0] * len(rewards)
    for members in _members(group_index).values():
        size = len(members)
        total = 0.0
        for i in members:
            total += rewards[i]
        mean = total / size
        if verl_singletons and size == 1:
            mean = 0.0
        squares = 0.0
        for i in members:
            squares += (rewards[i] - mean) ** 2
        ddof = 1 if unbiased_std else 0
        std = math.sqrt(squares / (size - ddof)) if size > ddof else 0.0
        if verl_singletons and size == 1:
            std = 1.0
        for i in members:
            dev = rewards[i] - mean
            out[i] = dev / (std + eps) if norm_by_std else dev
    return out


def _position_factor(schedule, p, m, params):
    if schedule == "linear":
        return 1.0 if m == 1 else 1 - (1 - params["w_min"]) * (p - 1) / (m - 1)
    if schedule == "exponential":
        return params["gamma"] ** (p - 1)
    if schedule == "top_m":
        return 1.0 if p <= params["m"] else params["w_min"]
    raise AssertionError(schedule)


def factors(schedule, ranks, group_index, *, scores=None, flagged=None, w_flag=None,
            **params):
    out = [math.nan] * len(ranks)
    for members in _members(group_index).values():
        ranked = [i for i in members if ranks[i] > 0]
        m = len(ranked)
        distinct = sorted({int(ranks[i]) for i in ranked})
        for i in ranked:
            r = int(ranks[i])
            tie = sum(1 for j in ranked if ranks[j] == r)
            if schedule == "tiered":
                tier = distinct.index(r)
                out[i] = params["factors"][min(tier, len(params["factors"]) - 1)]
            elif schedule == "scores":
                best = max(scores[j] for j in ranked)
                out[i] = math.exp((scores[i] - best) / params["temperature"])
            else:
                spanned = [_position_factor(schedule, p, m, params) for p in range(r, r + tie)]
                out[i] = sum(spanned) / tie
            if flagged is not None and flagged[i]:
                out[i] = min(out[i], w_flag)
    return out


def redistribute(advantages, group_index, passed, factors):
    out = [float(a) for a in advantages]
    reasons = {}
    for gid, members in _members(group_index).items():
        if any(passed[i] and math.isnan(factors[i]) for i in members):
            reasons[gid] = "no_ranking"
            continue
        j = [i for i in members if passed[i] and advantages[i] > 0]
        ws = [factors[i] for i in j]
        if not j:
            reasons[gid] = "nonpositive_sum"
        elif len(j) == 1:
            reasons[gid] = "single_pass"
        elif max(ws) - min(ws) <= 1e-12 * max(ws):
            reasons[gid] = "equal_factors"
        else:
            reasons[gid] = "redistributed"
            total = 0.0
            weighted = 0.0
            for i in j:
                total += advantages[i]
                weighted += advantages[i] * factors[i]
            for i in j:
                out[i] = advantages[i] * factors[i] * total / weighted
    return out, reasons


def gagar(rewards, group_index, passed, ranks, *, schedule, params, scores=None,
          flagged=None, w_flag=None, **grpo_options):
    base = grpo(rewards, group_index, **grpo_options)
    weights = factors(schedule, ranks, group_index, scores=scores, flagged=flagged,
                      w_flag=w_flag, **params)
    advantages, reasons = redistribute(base, group_index, passed, weights)
    return base, weights, advantages, reasons
