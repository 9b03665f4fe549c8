from django.urls import path

from webapp.exports import views

urlpatterns = [
    path("batches/<int:pk>/exports/", views.exports_panel, name="exports_panel"),
    path("batches/<int:pk>/exports/launch/", views.export_launch_view, name="export_launch"),
    path("exports/<int:pk>/files/<str:name>", views.export_download, name="export_download"),
]
