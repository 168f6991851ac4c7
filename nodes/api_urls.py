from django.urls import path

from nodes import apis

urlpatterns = [
    path("nodes", apis.NodeListApi.as_view(), name="api-nodes"),
    path("nodes/<int:node_id>/cards/<str:card_type>/<int:index>/release", apis.NodeCardReleaseApi.as_view(),
         name="api-node-card-release"),
    # A node's detail lists the tasks on its cards: its routes are in scheduling.api.urls, which hands them the
    # reader.
]
