from django.urls import path

from webapp.batches import views

urlpatterns = [
    path("", views.index, name="index"),
    path("batches/<int:pk>/", views.batch, name="batch"),
]
