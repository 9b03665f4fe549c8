"""The annotation queue of a batch, leases, and the batch page's annotation panel."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from webapp.models import Annotation, AnnotationPolicy, Batch, Group
from webapp.roles import RESEARCHER, has_role, role_required
from webapp.services.annotations import may_annotate
from webapp.services.progress import batch_review
from webapp.services.queue import held_lease, lease_release, next_group_for, queue_groups
from webapp.views.access import reader_required
from webapp.views.annotation_forms import PolicyForm
from webapp.views.annotations import annotator_required

WAITING_LIMIT = 1000  # "1000+": counting a huge queue exactly is a scan


def _batch(pk):
    return get_object_or_404(Batch.objects.select_related("annotation_policy"), pk=pk)


@require_GET
@annotator_required
def annotation_queue(request, pk):
    batch = _batch(pk)
    policy = AnnotationPolicy.of(batch)
    waiting = queue_groups(user=request.user, batch=batch, policy=policy)[:WAITING_LIMIT + 1].count()
    mine = (Annotation.objects.filter(group__batch=batch, user=request.user, kind=Annotation.Kind.RANKING)
            .order_by("-version").values_list("group_id", "group__group_id", "created_at"))
    recent, seen = [], set()
    for group_pk, group_id, created_at in mine:
        if group_pk not in seen:
            seen.add(group_pk)
            recent.append((group_pk, group_id, created_at))
    return render(request, "annotations/queue.html", {
        "batch": batch, "policy": policy, "criteria": _criteria_labels(policy),
        "held": held_lease(user=request.user, batch=batch),
        "waiting": min(waiting, WAITING_LIMIT), "waiting_more": waiting > WAITING_LIMIT,
        "ranked": len(recent), "recent": recent[:10],
    })


def _criteria_labels(policy):
    labels = dict(AnnotationPolicy.Criterion.choices)
    return [labels[c] for c in policy.criteria if c in labels]


@require_POST
@annotator_required
def queue_next(request, pk):
    """Lease the next group to the user and open it; `skip` gives a held group back first."""
    batch = _batch(pk)
    skip = []
    if request.POST.get("skip", "").isdigit():
        skipped = Group.objects.filter(batch=batch, pk=int(request.POST["skip"])).first()
        if skipped is not None:
            lease_release(group=skipped, user=request.user)
            skip.append(skipped.pk)
    assignment = next_group_for(user=request.user, batch=batch, skip=skip)
    if assignment is None:
        messages.info(request, "Nothing left for you in this queue.")
        return redirect("annotation_queue", batch.pk)
    until = timezone.localtime(assignment.lease.expires_at).strftime("%H:%M")
    messages.info(request, f"{'Still yours' if assignment.resumed else 'Yours'} until {until} UTC: "
                           f"rank it, or skip it to give it back.")
    return redirect(reverse("group", args=[assignment.group.pk]) + "#ranking")


@require_POST
@annotator_required
def lease_release_view(request, pk):
    group = get_object_or_404(Group, pk=pk)
    if lease_release(group=group, user=request.user):
        messages.info(request, f"Gave {group.group_id} back to the queue.")
    return redirect("annotation_queue", group.batch_id)


@require_GET
@reader_required
@vary_on_headers("HX-Request")
def annotation_panel(request, pk):
    return _panel(request, _batch(pk))


@require_POST
@role_required(RESEARCHER)
def annotation_policy(request, pk):
    batch = _batch(pk)
    form = PolicyForm(request.POST, instance=AnnotationPolicy.of(batch))
    if not form.is_valid():
        return _panel(request, batch, form=form, status=400)
    policy = form.save(commit=False)
    policy.updated_by = request.user
    policy.save()
    batch.annotation_policy = policy
    if request.htmx:
        return _panel(request, batch, notice="Annotation policy saved.")
    messages.success(request, "Annotation policy saved.")
    return redirect("annotation_panel", batch.pk)


def _panel(request, batch, *, form=None, notice="", status=200):
    policy = AnnotationPolicy.of(batch)
    context = {
        "batch": batch, "policy": policy, "criteria": _criteria_labels(policy), "review": batch_review(batch),
        "form": form or PolicyForm(instance=policy), "can_write": has_role(request.user, RESEARCHER),
        "can_annotate": may_annotate(request.user), "notice": notice,
    }
    # htmx does not swap 4xx answers: a refused form goes back as 200 so it shows its errors
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "annotations/_panel.html", context)
    return render(request, "annotations/panel.html", context, status=status)
