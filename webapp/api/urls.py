from django.urls import path, re_path

from webapp.api import views
from webapp.api.endpoints import api

urlpatterns = [
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/new/", views.api_token_create_view, name="api_token_create"),
    path("tokens/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("", api.urls),
    re_path(r"^(?P<path>.*)$", views.api_not_found),
]
