from django.urls import path

from webapp.evidence import views

urlpatterns = [
    path("groups/<int:pk>/evidence/", views.evidence, name="evidence"),
]
