from django.urls import path

from webapp.views import annotations, queue

urlpatterns = [
    path("groups/<int:pk>/ranking/", annotations.ranking_save_view, name="ranking_save"),
    path("groups/<int:pk>/ranking/preview/", annotations.ranking_preview, name="ranking_preview"),
    path("groups/<int:pk>/history/", annotations.ranking_history, name="ranking_history"),
    path("groups/<int:pk>/history/revert/", annotations.ranking_revert_view, name="ranking_revert"),
    path("groups/<int:pk>/lease/release/", queue.lease_release_view, name="lease_release"),
    path("batches/<int:pk>/queue/", queue.annotation_queue, name="annotation_queue"),
    path("batches/<int:pk>/queue/next/", queue.queue_next, name="queue_next"),
    path("batches/<int:pk>/annotation/", queue.annotation_panel, name="annotation_panel"),
    path("batches/<int:pk>/annotation/policy/", queue.annotation_policy, name="annotation_policy"),
]
