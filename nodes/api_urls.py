from django.urls import path

from nodes import apis

urlpatterns = [
    path("nodes", apis.NodeListApi.as_view(), name="api-nodes"),
    # A node's detail lists the tasks on its cards: its routes are in scheduling.api.urls, which hands them the
    # reader.
]
