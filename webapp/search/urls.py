from django.urls import path

from webapp.search import views

urlpatterns = [
    path("batches/<int:pk>/search/", views.search, name="search"),
]
