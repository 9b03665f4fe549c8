from django.urls import path

from webapp import grading_views

urlpatterns = [
    path("batches/<int:pk>/grading/", grading_views.grading_panel, name="grading_panel"),
    path("batches/<int:pk>/grading/launch/", grading_views.grading_launch_view, name="grading_launch"),
    path("batches/<int:pk>/grading/retry/", grading_views.grading_retry_view, name="grading_retry"),
    path("gradings/<int:pk>/", grading_views.grading_detail, name="grading_detail"),
    path("batches/<int:pk>/advantage-config/", grading_views.advantage_config_view, name="advantage_config"),
]
