from django.urls import path

from webapp.runs import views

urlpatterns = [
    path("runs/", views.runs, name="runs"),
    path("runs/compare/", views.runs_compare, name="runs_compare"),
    path("runs/<int:pk>/", views.run_page, name="run"),
    path("runs/<int:pk>/table/", views.run_table, name="run_table"),
    path("runs/<int:pk>/figures.csv", views.run_csv, name="run_csv"),
    path("runs/<int:pk>/advantages.tar", views.run_export, name="run_export"),
    path("runs/<int:pk>/prune/", views.run_prune_view, name="run_prune"),
]
