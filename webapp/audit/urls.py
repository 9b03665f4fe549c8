from django.urls import path

from webapp.audit import views

urlpatterns = [
    path("audit/", views.audit_sets, name="audit_sets"),
    path("audit/sets/<int:pk>/", views.audit_set, name="audit_set"),
    path("audit/sets/<int:pk>/next/", views.audit_next, name="audit_next"),
    path("audit/sets/<int:pk>/report/", views.audit_report, name="audit_report"),
    path("audit/sets/<int:pk>/report.json", views.audit_report_json, name="audit_report_json"),
    path("audit/items/<int:pk>/", views.audit_item, name="audit_item"),
    path("audit/items/<int:pk>/verdict/", views.audit_verdict, name="audit_verdict"),
    path("groups/<int:pk>/gold/", views.gold_mark_view, name="gold_mark"),
    path("groups/<int:pk>/gold/remove/", views.gold_unmark_view, name="gold_unmark"),
    path("batches/<int:pk>/gold/", views.gold_list, name="gold_list"),
    path("batches/<int:pk>/gold/regrade/", views.gold_regrade, name="gold_regrade"),
    path("audit/dashboard/", views.dashboard, name="audit_dashboard"),
    path("audit/dashboard/progress/", views.dashboard_progress, name="audit_dashboard_progress"),
    path("audit/dashboard/<slug:table>.csv", views.dashboard_csv, name="audit_dashboard_csv"),
]
