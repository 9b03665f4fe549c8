from django.contrib import admin

from webapp.models import Batch, Group, Trajectory, Transcript


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
