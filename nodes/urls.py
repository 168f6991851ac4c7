from django.urls import path

from nodes import join_views, views

urlpatterns = [
    path("nodes/", views.node_list, name="node-list"),
    path("nodes/add/", join_views.node_add, name="node-add"),
    # A node's page lists the tasks on its cards: its route is in scheduling.web.urls, which hands it the reader.
]
