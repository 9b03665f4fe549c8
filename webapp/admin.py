from django.contrib import admin

from webapp.models import (
    Annotation,
    AnnotationPolicy,
    Batch,
    Grading,
    GradingRun,
    Group,
    Lease,
    Trajectory,
    Transcript,
)


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at", "created_by", "n_groups", "n_trajectories", "n_passed"]
    search_fields = ["name"]
    readonly_fields = ["created_at"]


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    list_display = ["group_id", "batch", "label", "n_trajectories", "n_passed"]
    list_filter = ["label"]
    list_select_related = ["batch"]
    search_fields = ["group_id", "task_id"]
    raw_id_fields = ["batch"]


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ["trajectory_id", "group", "reward", "passed"]
    list_filter = ["passed"]
    list_select_related = ["group"]
    search_fields = ["trajectory_id", "group__group_id"]
    raw_id_fields = ["batch", "group"]


@admin.register(Transcript)
class TranscriptAdmin(admin.ModelAdmin):
    list_display = ["trajectory"]
    raw_id_fields = ["trajectory"]


@admin.register(GradingRun)
class GradingRunAdmin(admin.ModelAdmin):
    list_display = ["pk", "batch", "grader", "grader_version", "queue", "created_at", "created_by"]
    list_filter = ["grader", "queue"]
    list_select_related = ["batch", "created_by"]
    raw_id_fields = ["batch"]


@admin.register(Grading)
class GradingAdmin(admin.ModelAdmin):
    list_display = ["pk", "group", "run", "status", "attempts", "duration_s", "tokens", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["group", "run"]
    search_fields = ["group__group_id"]
    raw_id_fields = ["run", "group"]
    readonly_fields = ["claim_token"]


@admin.register(AnnotationPolicy)
class AnnotationPolicyAdmin(admin.ModelAdmin):
    list_display = ["batch", "criteria", "blind", "overlap", "lease_minutes", "updated_at", "updated_by"]
    raw_id_fields = ["batch"]


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    """Read-only: annotations are never changed, a revert or a new save adds a version."""

    list_display = ["group", "version", "kind", "independent", "user", "based_on_version", "created_at"]
    list_filter = ["kind", "independent"]
    list_select_related = ["group", "user"]
    search_fields = ["group__group_id", "user__username"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = ["group", "slot", "user", "taken_at", "expires_at", "completed_at"]
    list_select_related = ["group", "user"]
    raw_id_fields = ["group"]
