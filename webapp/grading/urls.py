from django.urls import path

from webapp.grading import views

urlpatterns = [
    path("batches/<int:pk>/grading/", views.grading_panel, name="grading_panel"),
    path("batches/<int:pk>/grading/launch/", views.grading_launch_view, name="grading_launch"),
    path("batches/<int:pk>/grading/retry/", views.grading_retry_view, name="grading_retry"),
    path("batches/<int:pk>/grading/cancel/", views.grading_cancel_view, name="grading_cancel"),
    path("gradings/<int:pk>/", views.grading_detail, name="grading_detail"),
    path("batches/<int:pk>/advantage-config/", views.advantage_config_view, name="advantage_config"),
]
