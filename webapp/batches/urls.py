from django.urls import path

from webapp.batches import views

urlpatterns = [
    path("", views.index, name="index"),
    path("batches/import/", views.import_files, name="batch_import"),
    path("batches/<int:pk>/", views.batch, name="batch"),
]
